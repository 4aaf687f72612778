// serve-imagenet-shards: reads webdataset shards, decodes, random-crops and
// flips, and publishes batches of [images, labels].
//   serve-imagenet-shards -u 'shards/imagenet-train-{000000..000146}.tar' -b 256 -w 8 zpub://0.0.0.0:7880
#include <iostream>

#include "image_server_cli.h"
#include "tensorcom/transport/brace.h"
#include "tensorcom/programs/program.h"

namespace po = boost::program_options;
using namespace tensorcom;

int main(int argc, char** argv) {
  return programs::program_main("serve-imagenet-shards", [&]() -> int {
    pipeline::ImageServerCli cli("serve-imagenet-shards",
                                 "serve-imagenet-shards [options] -u SHARDS [ADDRESS...]\n"
                                 "SHARDS: paths, file:PATH, pipe:COMMAND or http(s) URLs, brace-expanded",
                                 {.parallel = "parallel,p", .num_workers = true, .shuffle_by_default = true});
    std::vector<std::string> shards;
    // Required: the reference's default is a Google bucket that is gone.
    cli.options.add_options()("shards,url,u", po::value(&shards)->required(),
                              "shards to read (repeatable; also --url, the reference's name)");
    if (!cli.parse(argc, argv)) return 0;
    auto source = pipeline::shard_source(brace_expand_all(shards), cli.server.max_image_bytes, cli.server.should_stop);
    return pipeline::run_image_server(cli.server, *source);
  });
}
