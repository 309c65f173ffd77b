//===- ReplayMain.cpp - Runs a fuzz target over files, without libFuzzer --===//
//
// The main of every fuzz target in a normal build (DAYBREAK_FUZZ off): calls
// LLVMFuzzerTestOneInput once on each of the files given and on each file in
// the directories given (one level deep, in name order, dot files such as
// .gitkeep skipped), so that the test suite replays the seed corpus and the
// regression inputs. A crash or a failed check ends the run; otherwise it
// prints how many inputs it ran and exits 0.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/stat.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
// Defined by the targets that set something up first, as libFuzzer allows.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int *argc,
                                                          char ***argv);

/// Appends `path`, or the regular files directly in it, to `files`.
static bool collect(const std::string &path, std::vector<std::string> &files) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0)
    return false;
  if (!S_ISDIR(info.st_mode)) {
    files.push_back(path);
    return true;
  }
  DIR *dir = ::opendir(path.c_str());
  if (!dir)
    return false;
  std::vector<std::string> found;
  while (const dirent *entry = ::readdir(dir)) {
    std::string child = path + "/" + entry->d_name;
    if (entry->d_name[0] != '.' && ::stat(child.c_str(), &info) == 0 &&
        S_ISREG(info.st_mode))
      found.push_back(child);
  }
  ::closedir(dir);
  std::sort(found.begin(), found.end());
  files.insert(files.end(), found.begin(), found.end());
  return true;
}

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    // libFuzzer's flags (the tests pass -runs=0, which makes a libFuzzer
    // build replay the same files), which a replay has no use for.
    if (argv[i][0] == '-')
      continue;
    if (!collect(argv[i], files)) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], argv[i]);
      return 1;
    }
  }
  for (const std::string &file : files) {
    std::ifstream in(file, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    if (!in.eof() && in.fail()) {
      std::fprintf(stderr, "%s: cannot read %s\n", argv[0], file.c_str());
      return 1;
    }
    // A buffer of exactly the input's size, as libFuzzer hands over, so
    // that a read past the end is an ASan report in a sanitized build.
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("replayed %zu inputs\n", files.size());
  return 0;
}
