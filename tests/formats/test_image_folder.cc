// ImageFolder trees read with torchvision's rules, and whole-file reads.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "tensorcom/codec/error.h"
#include "tensorcom/formats/file_io.h"
#include "tensorcom/formats/image_folder.h"
#include "test_support.h"

using namespace tensorcom;
using namespace tensorcom::formats;
using tensorcom::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void touch(const fs::path& path, const std::string& text = "x") {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::vector<std::pair<std::string, int>> listing(const ImageFolder& folder) {
  std::vector<std::pair<std::string, int>> out;
  for (const FolderImage& image : folder.images) out.emplace_back(image.relative.generic_string(), image.label);
  return out;
}

}  // namespace

TEST_CASE("ImageFolder classes and images follow torchvision") {
  TempDir dir;
  const fs::path root = dir.path / "train";
  touch(root / "zebra" / "img.1.JPEG");
  touch(root / "zebra" / "b.jpg");
  touch(root / "zebra" / "deeper" / "c.png");  // below the class folder: included
  touch(root / "zebra" / "deep-x" / "d.png");  // "deep-x" < "deeper": '-' sorts before 'e'
  touch(root / "apple" / "x.webp");
  touch(root / "apple" / "notes.txt");
  touch(root / "apple" / ".hidden.jpg");  // hidden files count, as in torchvision
  touch(root / "Mango" / "p.PNG");
  touch(root / ".ipynb_checkpoints" / "q.jpg");  // and so do hidden class folders
  fs::create_directories(root / "empty");
  touch(root / "loose.jpg");  // not in a class folder: ignored
  fs::create_directory_symlink(root / "zebra", root / "zebra" / "deeper" / "loop");

  ImageFolder folder = scan_image_folder(root);
  CHECK(folder.classes == std::vector<std::string>{".ipynb_checkpoints", "Mango", "apple", "empty", "zebra"});
  CHECK(folder.empty_classes == std::vector<std::string>{"empty"});
  CHECK(listing(folder) == std::vector<std::pair<std::string, int>>{
                               {".ipynb_checkpoints/q.jpg", 0},
                               {"Mango/p.PNG", 1},
                               {"apple/.hidden.jpg", 2},
                               {"apple/x.webp", 2},
                               {"zebra/b.jpg", 4},
                               {"zebra/img.1.JPEG", 4},
                               {"zebra/deep-x/d.png", 4},
                               {"zebra/deeper/c.png", 4},
                           });
  CHECK(folder.images[0].file == root / ".ipynb_checkpoints" / "q.jpg");
}

TEST_CASE("ImageFolder: a missing root names itself; a flat one has no classes") {
  TempDir dir;
  CHECK_THROWS_WITH_AS((void)scan_image_folder(dir.path / "missing"), doctest::Contains("missing"), IoError);
  touch(dir.path / "flat" / "a.jpg");
  ImageFolder flat = scan_image_folder(dir.path / "flat");
  CHECK(flat.classes.empty());
  CHECK(flat.images.empty());
}

TEST_CASE("whole-file reads within a limit") {
  TempDir dir;
  touch(dir.path / "f", "hello");
  FileContents all = read_file(dir.path / "f");
  CHECK(std::string(reinterpret_cast<const char*>(all.bytes.data()), all.bytes.size()) == "hello");
  CHECK_FALSE(all.over_limit);
  FileContents exact = read_file(dir.path / "f", 5);
  CHECK(exact.bytes.size() == 5);
  FileContents over = read_file(dir.path / "f", 4);
  CHECK(over.over_limit);
  CHECK(over.size == 5);
  CHECK(over.bytes.empty());
  CHECK_THROWS_AS((void)read_file(dir.path / "nope"), IoError);
  CHECK_THROWS_AS((void)read_file(dir.path), IoError);  // a folder
  SUBCASE("a file without a size (procfs) is read whole") {
    FileContents status = read_file("/proc/self/status");
    CHECK(status.bytes.size() > 100);
  }
}
