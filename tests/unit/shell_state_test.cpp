// The pure parts of shell contexts and of the one path space: the strict parse of a state dump
// (which comes from inside the sandbox and is hostile by assumption), shell quoting of argv, and
// the lexical normalization of file-API paths.

#include <gtest/gtest.h>

#include "sessions/files/path_space.hpp"
#include "sessions/shell_context.hpp"

namespace corral {
namespace {

std::string dump(std::initializer_list<std::string_view> fields) {
    std::string out;
    for (auto field : fields) {
        out += field;
        out += '\0';
    }
    return out;
}

TEST(ShellState, ParsesAWellFormedDump) {
    auto state = parse_shell_state(dump({"corral-shell-state-1", "cwd", "/workspace/repo", "env",
                                         "X=1", "env", "MULTI=a\nb=c", "env", "SHLVL=2", "fn",
                                         "greet", "alias", "ll", "defs", "greet () { :; }", "end"}));
    ASSERT_TRUE(state) << state.error().describe();
    EXPECT_EQ(state->cwd, "/workspace/repo");
    EXPECT_EQ(state->env.size(), 2u) << "SHLVL is bash's own";
    EXPECT_EQ(state->env.at("MULTI"), "a\nb=c");
    EXPECT_EQ(state->functions, std::vector<std::string>{"greet"});
    EXPECT_EQ(state->aliases, std::vector<std::string>{"ll"});
    EXPECT_EQ(state->definitions, "greet () { :; }");
}

// Shellshock (CVE-2014-6271) rode on function definitions imported from variables named
// BASH_FUNC_x%%: a dump may carry only shell identifiers as names.
TEST(ShellState, RefusesEveryMalformedOrHostileDump) {
    const std::string ok_tail = std::string("defs") + '\0' + '\0' + "end" + '\0';
    const std::vector<std::string> bad = {
        "",
        dump({"corral-shell-state-2", "cwd", "/", "defs", "", "end"}),
        dump({"corral-shell-state-1", "cwd", "relative", "defs", "", "end"}),
        dump({"corral-shell-state-1", "cwd", "/", "env", "BASH_FUNC_ls%%=() { :; }", "defs", "",
              "end"}),
        dump({"corral-shell-state-1", "cwd", "/", "env", "1X=1", "defs", "", "end"}),
        dump({"corral-shell-state-1", "cwd", "/", "env", "NOEQUALS", "defs", "", "end"}),
        dump({"corral-shell-state-1", "cwd", "/", "defs", "", "end", "cwd", "/etc"}),
        dump({"corral-shell-state-1", "cwd", "/", "cwd", "/etc", "defs", "", "end"}),
        dump({"corral-shell-state-1", "cwd", "/", "defs", ""}),
        dump({"corral-shell-state-1", "cwd", "/", "exec", "rm -rf /", "defs", "", "end"}),
        dump({"corral-shell-state-1", "cwd", "/", "alias", "a;b", "defs", "", "end"}),
        dump({"corral-shell-state-1", "defs", "", "end"}),
        std::string("corral-shell-state-1") + '\0' + "cwd" + '\0' + "/",  // no terminating NUL
        dump({"corral-shell-state-1", "cwd", "/", "defs", std::string(200 << 10, 'x'), "end"}),
        std::string(2 << 20, '\0'),
    };
    for (const auto& text : bad) {
        auto state = parse_shell_state(text);
        EXPECT_FALSE(state) << "accepted: " << text.substr(0, 80);
        if (!state) {
            EXPECT_NE(state.error().message.find("refused"), std::string::npos);
        }
    }
}

TEST(ShellState, QuoteCommandKeepsEveryWordLiteral) {
    EXPECT_EQ(quote_command({"echo", "a b", "it's", "$(x)"}), "'echo' 'a b' 'it'\\''s' '$(x)'");
}

TEST(ShellState, WrapperArgvCarriesTheStateAsSeparateWords) {
    ShellState state;
    state.cwd = "/w'; rm -rf /";
    state.definitions = "f () { :; }";
    auto argv = shell_context_argv("/bin/bash", state, "echo hi");
    ASSERT_EQ(argv.size(), 7u);
    EXPECT_EQ(argv[0], "/bin/bash");
    EXPECT_EQ(argv[1], "-c");
    EXPECT_EQ(argv[4], state.definitions);
    EXPECT_EQ(argv[5], state.cwd) << "data is passed as positional words, never spliced into code";
    EXPECT_EQ(argv[6], "echo hi");
}

TEST(PathSpaceNormalize, ResolvesLikeTheKernelWithoutSymlinks) {
    EXPECT_EQ(*normalize_sandbox_path("a.txt", "/workspace"), "/workspace/a.txt");
    EXPECT_EQ(*normalize_sandbox_path("./a//b/", "/workspace"), "/workspace/a/b");
    EXPECT_EQ(*normalize_sandbox_path("../../../../etc/passwd", "/workspace"), "/etc/passwd");
    EXPECT_EQ(*normalize_sandbox_path("/usr/share/../lib", "/workspace"), "/usr/lib");
    EXPECT_EQ(*normalize_sandbox_path("..", "/"), "/");
    EXPECT_EQ(*normalize_sandbox_path("/", "/workspace"), "/");
    EXPECT_FALSE(normalize_sandbox_path("", "/workspace"));
    EXPECT_FALSE(normalize_sandbox_path(std::string_view("a\0b", 3), "/workspace"));
}

}  // namespace
}  // namespace corral
