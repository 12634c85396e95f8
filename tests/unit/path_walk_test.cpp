// path_components and drop_last_component (base/path_walk.hpp): how the mount plan splits a
// policy's path and applies a `..`, the way the kernel walks it. A `..` that climbed above the
// root or kept a component would resolve a hidden or bound path somewhere else than the kernel
// will (the path-confusion class of CVE-2018-15664).

#include "base/path_walk.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace corral {
namespace {

using Parts = std::vector<std::string>;

TEST(PathComponents, DropEmptyPartsAndDotsAndKeepDotDot) {
    EXPECT_EQ(path_components("/a//b/./c/"), (Parts{"a", "b", "c"}));
    EXPECT_EQ(path_components("a/../b"), (Parts{"a", "..", "b"}));
    EXPECT_EQ(path_components("/"), Parts{});
    EXPECT_EQ(path_components(""), Parts{});
    EXPECT_EQ(path_components("./."), Parts{});
    EXPECT_EQ(path_components("/.../..a"), (Parts{"...", "..a"}));  // names, not dots
}

TEST(DropLastComponent, ClimbsOneComponentAndStaysAtTheRoot) {
    EXPECT_EQ(drop_last_component("/a/b"), "/a");
    EXPECT_EQ(drop_last_component("/a"), "");
    EXPECT_EQ(drop_last_component(""), "");  // `..` at the root stays there
}

TEST(DropLastComponent, AWalkWithDotDotEndsWhereTheKernelsWould) {
    auto walk = [](const std::string& path) {
        std::string done;
        for (const auto& part : path_components(path))
            done = part == ".." ? drop_last_component(done) : done + "/" + part;
        return done.empty() ? std::string("/") : done;
    };
    EXPECT_EQ(walk("/etc/../../../proc/./sys"), "/proc/sys");
    EXPECT_EQ(walk("/a/b/../c"), "/a/c");
    EXPECT_EQ(walk("/../.."), "/");
}

}  // namespace
}  // namespace corral
