// serve-imagenet-shards: reads webdataset shards, decodes, random-crops and
// flips, and publishes batches of [images, labels].
//   serve-imagenet-shards -u 'shards/imagenet-train-{000000..000146}.tar' -b 256 -w 8 zpub://0.0.0.0:7880
#include <iostream>

#include "image_server_cli.h"
#include "tensorcom/brace.h"
#include "tensorcom/programs/program.h"

namespace po = boost::program_options;
using namespace tensorcom;

int main(int argc, char** argv) {
  return programs::program_main("serve-imagenet-shards", [&]() -> int {
    pipeline::ImageServerCli cli("serve-imagenet-shards",
                                 "serve-imagenet-shards [options] -u SHARDS [ADDRESS...]\n"
                                 "SHARDS: paths, file:PATH or pipe:COMMAND, brace-expanded");
    std::vector<std::string> shards;
    cli.options.add_options()("shards,u", po::value(&shards)->required(), "shards to read (repeatable)");
    if (!cli.parse(argc, argv)) return 0;
    auto source = pipeline::shard_source(brace_expand_all(shards), cli.server.max_image_bytes, cli.server.should_stop);
    return pipeline::run_image_server(cli.server, *source);
  });
}
