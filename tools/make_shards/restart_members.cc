#include "restart_members.h"

#include "tensorcom/imaging/format.h"
#include "tensorcom/imaging/restart_markers.h"

namespace make_shards {

std::vector<std::optional<std::string>> add_restart_markers(std::vector<tensorcom::formats::ShardMember>& members) {
  using tensorcom::imaging::ImageFormat;
  std::vector<std::optional<std::string>> unchanged(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (tensorcom::imaging::sniff_format(members[i].data) == ImageFormat::kJpeg) {
      unchanged[i] = tensorcom::imaging::add_restart_markers(members[i].data);
    }
  }
  return unchanged;
}

}  // namespace make_shards
