// serve-imagenet-dir: serves an ImageFolder tree (DIR/train/CLASS/*.jpg, or
// DIR/val with --val, or DIR/CLASS/*.jpg) like serve-imagenet-shards.
//   serve-imagenet-dir -d /data/imagenet -b 256 -w 8 zpub://0.0.0.0:7880
#include <cerrno>
#include <filesystem>
#include <iostream>

#include "image_server_cli.h"
#include "tensorcom/formats/image_folder.h"
#include "tensorcom/programs/program.h"

namespace po = boost::program_options;
using namespace tensorcom;

// The reference's default root.
constexpr const char* kDefaultDir = "./imagenet";

int main(int argc, char** argv) {
  return programs::program_main("serve-imagenet-dir", [&]() -> int {
    pipeline::ImageServerCli cli("serve-imagenet-dir", "serve-imagenet-dir [options] [-d DIR] [ADDRESS...]",
                                 {.parallel = "parallel,P", .normalize = true, .shuffle_by_default = false});
    std::string dir;
    cli.options.add_options()("dir,d", po::value(&dir)->default_value(kDefaultDir),
                              "ImageFolder root (with train/ and val/, or classes)");
    if (!cli.parse(argc, argv)) return 0;
    if (!std::filesystem::is_directory(dir)) {
      throw IoError("no ImageFolder root '" + dir + "' (" +
                        (cli.vars()["dir"].defaulted() ? "the default of -d; give yours with -d DIR)" : "-d)"),
                    ENOENT);
    }
    std::filesystem::path split = std::filesystem::path(dir) / (cli.vars().count("val") ? "val" : "train");
    formats::ImageFolder folder =
        formats::scan_image_folder(std::filesystem::is_directory(split) ? split : std::filesystem::path(dir));
    if (folder.images.empty()) throw IoError("no images under '" + dir + "' (expected DIR/CLASS/*.jpg)", ENOENT);
    for (const std::string& name : folder.empty_classes) {
      std::cerr << "serve-imagenet-dir: class folder " << name << " holds no image (its label is kept)\n";
    }
    auto source = pipeline::folder_source(std::move(folder), cli.server.max_image_bytes);
    return pipeline::run_image_server(cli.server, *source);
  });
}
