// serve-imagenet-dir: serves an ImageFolder tree (DIR/train/CLASS/*.jpg, or
// DIR/val with --val, or DIR/CLASS/*.jpg) like serve-imagenet-shards.
//   serve-imagenet-dir -d /data/imagenet -b 256 -w 8 zpub://0.0.0.0:7880
#include <filesystem>
#include <iostream>

#include "image_server_cli.h"
#include "tool_main.h"

namespace po = boost::program_options;
using namespace tensorcom;

int main(int argc, char** argv) {
  return tool_main("serve-imagenet-dir", [&]() -> int {
    pipeline::ImageServerCli cli("serve-imagenet-dir", "serve-imagenet-dir [options] -d DIR [ADDRESS...]");
    std::string dir;
    cli.options.add_options()("dir,d", po::value(&dir)->required(), "ImageFolder root (with train/ and val/, or classes)");
    if (!cli.parse(argc, argv)) return 0;
    std::filesystem::path split = std::filesystem::path(dir) / (cli.vars().count("val") ? "val" : "train");
    pipeline::SampleSourceSpec source;
    source.images = pipeline::list_image_folder(std::filesystem::is_directory(split) ? split.string() : dir);
    return pipeline::run_image_server(cli.server, source);
  });
}
