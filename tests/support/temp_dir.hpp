#pragma once
// A scratch directory for a test, shared by every suite: each used to make its own with
// mkdtemp(3), several assigning its result to a std::string unchecked (a NULL there is undefined
// behaviour, not a failed test).

#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

namespace corral::test_support {

/// A fresh directory /tmp/<prefix>-XXXXXX (mode 0700) for a fixture that removes it itself
/// (after the daemon it gave a state directory has stopped); throws, naming why, where it cannot
/// be made: a test that catches nothing fails with that message.
inline std::string make_temp_dir(const std::string& prefix) {
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr)
        throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
    return pattern;
}

/// A fresh directory /tmp/<prefix>-XXXXXX, removed with what is in it however the test ends;
/// path() is empty when it could not be made (a fixture asserts it in SetUp).
class TempDir {
  public:
    explicit TempDir(const std::string& prefix) {
        std::string pattern = "/tmp/" + prefix + "-XXXXXX";
        if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
    }
    ~TempDir() {
        if (!path_.empty()) {
            std::error_code ignored;
            std::filesystem::remove_all(path_, ignored);
        }
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    /// `name` inside it.
    std::filesystem::path operator/(const std::string& name) const {
        return std::filesystem::path(path_) / name;
    }

  private:
    std::string path_;
};

}  // namespace corral::test_support
