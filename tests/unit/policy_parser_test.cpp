#include "policies/policy_parser.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

PolicyParseResult parse(const std::string& yaml) {
    return parse_policy(yaml, "t.yaml");
}

Policy parse_ok(const std::string& yaml) {
    PolicyParseResult result = parse(yaml);
    EXPECT_TRUE(result.ok()) << result.format_errors();
    return result.policy.value_or(Policy{});
}

// Asserts the document fails with exactly one diagnostic at line:column for `key`.
void expect_error(const std::string& yaml, int line, int column, const std::string& key,
                  const std::string& message_part) {
    SCOPED_TRACE(yaml);
    PolicyParseResult result = parse(yaml);
    EXPECT_FALSE(result.ok());
    ASSERT_EQ(result.diagnostics.size(), 1u) << result.format_errors();
    const PolicyDiagnostic& d = result.diagnostics[0];
    EXPECT_EQ(d.file, "t.yaml");
    EXPECT_EQ(d.line, line) << d.format();
    EXPECT_EQ(d.column, column) << d.format();
    EXPECT_EQ(d.key, key) << d.format();
    EXPECT_THAT(d.message, HasSubstr(message_part));
}

// A scratch directory removed with everything in it, even when a test fails, that policy files
// are written into (one that cannot be made fails the test, never writes beside /).
class PolicyDir : public test_support::TempDir {
  public:
    PolicyDir() : TempDir("corral-policy-test") {
        if (path().empty()) throw std::runtime_error("mkdtemp: cannot make a scratch directory");
    }
    std::string write(const std::string& name, const std::string& content) const {
        fs::path file = *this / name;
        fs::create_directories(file.parent_path());
        std::ofstream(file) << content;
        return file.string();
    }
};

// ---- diagnostics: each kind, with its exact position and key ----

TEST(PolicyParser, UnknownTopLevelKeyIsAnError) {
    expect_error("name: x\nbogus: 1\n", 2, 1, "bogus", "unknown key");
}

TEST(PolicyParser, UnknownNestedKeyNamesTheDottedPath) {
    expect_error("limits:\n  memroy: 1Gi\n", 2, 3, "limits.memroy", "expected one of: memory");
}

TEST(PolicyParser, DuplicateKeyIsAnError) {
    expect_error("limits:\n  pids: 10\n  pids: 20\n", 3, 3, "limits.pids", "duplicate key");
}

TEST(PolicyParser, WrongTypeSaysWhatWasExpected) {
    expect_error("namespaces: { pid: maybe }\n", 1, 20, "namespaces.pid", "expected true or false");
    expect_error("limits: [1, 2]\n", 1, 9, "limits", "expected a mapping");
    expect_error("filesystem:\n  hidden: /home\n", 2, 11, "filesystem.hidden", "expected a list");
    expect_error("env:\n  set: {A: [1]}\n", 2, 12, "env.set.A", "expected a string value");
}

TEST(PolicyParser, BadSizeUnitIsAnError) {
    PolicyParseResult result = parse("limits:\n  memory: 12XB\n");
    ASSERT_EQ(result.diagnostics.size(), 1u);
    EXPECT_EQ(
        result.diagnostics[0].format(),
        "t.yaml:2:11: limits.memory: bad size `12XB` (expected e.g. 512Mi, 2G, 64k or a number "
        "of bytes)");
}

TEST(PolicyParser, BadDurationIsAnError) {
    expect_error("timeouts:\n  command: 30\n", 2, 12, "timeouts.command", "bad duration `30`");
    expect_error("timeouts:\n  idle: 0\n", 2, 9, "timeouts.idle", "greater than 0");
}

TEST(PolicyParser, NegativeValuesAreErrors) {
    expect_error("limits:\n  pids: -5\n", 2, 9, "limits.pids", "must not be negative");
    expect_error("limits:\n  memory: -1Gi\n", 2, 11, "limits.memory", "must not be negative");
}

TEST(PolicyParser, OutOfRangeValuesAreErrors) {
    expect_error("limits: { io_weight: 20000 }\n", 1, 22, "limits.io_weight", "from 1 to 10000");
    expect_error("limits: { pids: 0 }\n", 1, 17, "limits.pids", "from 1 to");
    expect_error("limits: { memory: 1k }\n", 1, 19, "limits.memory", "at least 1Mi");
    expect_error("user: { uid: 4294967295 }\n", 1, 14, "user.uid", "out of range");
    expect_error("network: { ports: 5000 }\n", 1, 19, "network.ports", "from 0 to 1024");
}

TEST(PolicyParser, CpuMustBePositive) {
    expect_error("limits: { cpu: 0 }\n", 1, 16, "limits.cpu", "greater than 0");
    expect_error("limits: { cpu: -1.5 }\n", 1, 16, "limits.cpu", "greater than 0");
    expect_error("limits: { cpu: lots }\n", 1, 16, "limits.cpu", "greater than 0");
    EXPECT_EQ(parse_ok("limits: { cpu: 1.5 }\n").limits.cpu, 1.5);
}

TEST(PolicyParser, RelativePathsAreErrors) {
    expect_error("namespaces: { mount: true }\nfilesystem:\n  read_only: [/usr, lib]\n", 3, 21,
                 "filesystem.read_only[1]", "absolute path");
    expect_error("landlock:\n  write: [workspace]\n", 2, 11, "landlock.write[0]", "absolute path");
    expect_error("landlock:\n  read: [/usr/../etc]\n", 2, 10, "landlock.read[0]", "`..`");
    expect_error("namespaces: { mount: true }\nfilesystem:\n  tmpfs: { tmp: 1Mi }\n", 3, 12,
                 "filesystem.tmpfs[tmp]", "absolute path");
    expect_error("workdir: { mount: work }\n", 1, 19, "workdir.mount", "absolute path");
}

TEST(PolicyParser, TmpfsNeedsANonZeroSize) {
    expect_error("namespaces: { mount: true }\nfilesystem:\n  tmpfs: { /tmp: 0 }\n", 3, 18,
                 "filesystem.tmpfs[/tmp]", "at least 4Ki");
}

TEST(PolicyParser, BadNetworkModeIsAnError) {
    expect_error("namespaces:\n  network: bridge\n", 2, 12, "namespaces.network",
                 "expected one of isolated, host, got `bridge`");
}

TEST(PolicyParser, AllowEntryNeedsAPort) {
    expect_error("namespaces: { network: isolated }\nnetwork:\n  allow: [example.com]\n", 3, 11,
                 "network.allow[0]", "expected host:port");
    expect_error("namespaces: { network: isolated }\nnetwork:\n  allow: ['db:0']\n", 3, 11,
                 "network.allow[0]", "expected host:port");
    Policy policy = parse_ok(
        "namespaces: { network: isolated }\nnetwork: { allow: ['127.0.0.1:5432', '[::1]:443', "
        "'localhost:6379'] }\n");
    EXPECT_EQ(policy.network.allow.size(), 3u);
}

TEST(PolicyParser, AllowRefusesWhatIsNotHostLoopbackAtParseTime) {
    expect_error("namespaces: { network: isolated }\nnetwork:\n  allow: ['api.example.com:443']\n",
                 3, 11, "network.allow[0]", "only host loopback destinations");
    expect_error("namespaces: { network: isolated }\nnetwork:\n  allow: ['10.0.0.1:80']\n", 3, 11,
                 "network.allow[0]", "only host loopback destinations");
}

TEST(PolicyParser, UnknownSeccompPresetAndActionAreErrors) {
    expect_error("seccomp: { preset: paranoid }\n", 1, 20, "seccomp.preset",
                 "expected one of default, strict, none");
    expect_error("seccomp: { action: kill }\n", 1, 20, "seccomp.action",
                 "expected one of errno, kill-process, log");
}

TEST(PolicyParser, SeccompErrnoTakesANameOrANumber) {
    EXPECT_EQ(parse_ok("seccomp: { errno: EACCES }\n").seccomp.errno_value, EACCES);
    EXPECT_EQ(parse_ok("seccomp: { errno: enosys }\n").seccomp.errno_value, ENOSYS);
    EXPECT_EQ(parse_ok("seccomp: { errno: 38 }\n").seccomp.errno_value, 38);
    expect_error("seccomp: { errno: EWHATEVER }\n", 1, 19, "seccomp.errno", "errno name");
    expect_error("seccomp: { errno: 0 }\n", 1, 19, "seccomp.errno", "from 1 to 4095");
}

TEST(PolicyParser, SyscallNamesAreCheckedForSyntaxOnly) {
    Policy policy =
        parse_ok("seccomp: { deny: [ptrace, '@mount', '@system-service', open_by_handle_at] }\n");
    EXPECT_EQ(policy.seccomp.deny.size(), 4u);
    expect_error("seccomp:\n  allow: [read, Ptrace]\n", 2, 17, "seccomp.allow[1]", "syscall name");
    expect_error("seccomp:\n  deny: ['@']\n", 2, 10, "seccomp.deny[0]", "syscall name");
}

TEST(PolicyParser, CapabilityNamesAreNormalizedAndCheckedForSyntax) {
    Policy policy =
        parse_ok("capabilities: { keep: [net_bind_service, CAP_CHOWN, cap_kill, CHOWN] }\n");
    EXPECT_EQ(policy.capabilities.keep,
              (std::vector<std::string>{"CAP_NET_BIND_SERVICE", "CAP_CHOWN", "CAP_KILL"}));
    expect_error("capabilities: { keep: [CAP_NET-ADMIN] }\n", 1, 24, "capabilities.keep[0]",
                 "capability name");
}

TEST(PolicyParser, UserIsInheritOrIds) {
    expect_error("user: bob\n", 1, 7, "user", "expected `inherit`");
    expect_error("user: { gid: 5 }\n", 1, 1, "user.uid", "missing uid");
    Policy policy = parse_ok("user: { uid: 1000 }\n");
    EXPECT_FALSE(policy.user.inherit);
    EXPECT_EQ(policy.user.gid, 1000u);  // gid defaults to the uid
    policy = parse_ok("user: { uid: 1, gid: 2, groups: [3, 4] }\n");
    EXPECT_EQ(policy.user.groups, (std::vector<gid_t>{3, 4}));
    EXPECT_TRUE(parse_ok("user: inherit\n").user.inherit);
}

TEST(PolicyParser, EnvNamesAreChecked) {
    expect_error("env:\n  pass: [LANG, 1BAD]\n", 2, 16, "env.pass[1]", "environment variable name");
    expect_error("env:\n  set: { 'A=B': x }\n", 2, 10, "env.set.A=B", "environment variable name");
}

TEST(PolicyParser, EnforcementAndNameAreChecked) {
    expect_error("enforcement: lenient\n", 1, 14, "enforcement", "strict, best-effort");
    expect_error("name: 'has space'\n", 1, 7, "name", "[A-Za-z0-9._-]");
    EXPECT_EQ(parse_ok("enforcement: best-effort\n").enforcement, Enforcement::best_effort);
}

TEST(PolicyParser, InvalidYamlReportsItsPosition) {
    PolicyParseResult result = parse("limits:\n  memory: [1Gi\n");
    ASSERT_EQ(result.diagnostics.size(), 1u);
    EXPECT_GT(result.diagnostics[0].line, 0);
    EXPECT_THAT(result.diagnostics[0].message, HasSubstr("invalid YAML"));
}

TEST(PolicyParser, SecondYamlDocumentIsAnError) {
    expect_error("name: a\n---\nname: b\n", 3, 1, "", "one YAML document");
}

TEST(PolicyParser, DocumentMustBeAMapping) {
    expect_error("- a\n- b\n", 1, 1, "", "expected a mapping of policy keys");
}

TEST(PolicyParser, CollectsEveryErrorNotJustTheFirst) {
    PolicyParseResult result = parse(
        "limits:\n"
        "  memory: lots\n"
        "  pids: 0\n"
        "timeouts: { grace: forever }\n"
        "colour: blue\n");
    ASSERT_EQ(result.diagnostics.size(), 4u) << result.format_errors();
    EXPECT_EQ(result.diagnostics[0].key, "limits.memory");
    EXPECT_EQ(result.diagnostics[1].key, "limits.pids");
    EXPECT_EQ(result.diagnostics[2].key, "timeouts.grace");
    EXPECT_EQ(result.diagnostics[3].key, "colour");
    std::string text = result.format_errors();
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 4);
}

TEST(PolicyParser, FilesystemChangesNeedTheMountNamespace) {
    expect_error("filesystem:\n  hidden: [/home]\n", 1, 1, "filesystem", "namespaces.mount: true");
    expect_error("extends: default\nnamespaces: { mount: false }\n", 2, 15, "filesystem",
                 "namespaces.mount: true");
}

TEST(PolicyParser, AllowListNeedsAnIsolatedNetwork) {
    expect_error("network:\n  allow: ['127.0.0.1:80']\n", 2, 3, "network.allow", "isolated");
}

// ---- values and defaults ----

TEST(PolicyParser, EmptyDocumentGivesBuiltInDefaults) {
    Policy policy = parse_ok("");
    Policy defaults;
    defaults.name = "t";  // a name is never inherited: it comes from the source
    EXPECT_EQ(policy, defaults);
}

TEST(PolicyParser, ReadsEveryKeyOfTheDesignExample) {
    Policy p = parse_ok(R"(
name: ci-strict
extends: default
user: { uid: 65534, gid: 65534 }
env: { clear: true, set: { PATH: /usr/bin:/bin }, pass: [LANG] }
workdir: { size: 1Gi }
limits: { memory: 512Mi, pids: 256, cpu: 1.5, open_files: 1024, output: 16Mi }
timeouts: { command: 10m, session: 2h, idle: 15m, grace: 5s }
namespaces: { pid: true, mount: true, ipc: true, uts: true, user: false, network: isolated }
filesystem:
  read_only: [/usr, /lib, /lib64, /bin, /etc]
  hidden: [/home, /root]
  tmpfs: { /tmp: 64Mi }
network: { ports: 2 }
seccomp: { preset: default, deny: [ptrace], action: errno }
capabilities: { keep: [] }
landlock: { read: [/usr], write: [/workspace] }
enforcement: strict
)");
    EXPECT_EQ(p.name, "ci-strict");
    EXPECT_EQ(p.user.uid, 65534u);
    EXPECT_EQ(p.env.set, (std::map<std::string, std::string>{{"PATH", "/usr/bin:/bin"}}));
    EXPECT_EQ(p.workdir.size, 1ull << 30);
    EXPECT_EQ(p.limits.memory, 512ull << 20);
    EXPECT_EQ(p.limits.cpu, 1.5);
    EXPECT_EQ(p.timeouts.session, std::chrono::hours(2));
    EXPECT_EQ(p.filesystem.read_only.size(), 5u);
    EXPECT_EQ(p.filesystem.tmpfs, (std::map<std::string, uint64_t>{{"/tmp", 64ull << 20}}));
    EXPECT_EQ(p.network.ports, 2u);
    EXPECT_EQ(p.seccomp.deny, std::vector<std::string>{"ptrace"});
    EXPECT_EQ(p.landlock.write, std::vector<std::string>{"/workspace"});
}

// ---- extends ----

TEST(PolicyExtends, ChildKeysReplaceParentLeavesOthersAreInherited) {
    Policy base = load_policy("default").policy.value();
    Policy p = parse_ok(
        "extends: default\n"
        "limits: { memory: 2Gi }\n"
        "filesystem: { hidden: [/srv] }\n"
        "env: { set: { FOO: bar } }\n");
    EXPECT_EQ(p.limits.memory, 2ull << 30);
    EXPECT_EQ(p.limits.output, base.limits.output);                    // sibling leaf inherited
    EXPECT_EQ(p.filesystem.hidden, std::vector<std::string>{"/srv"});  // lists replace wholesale
    EXPECT_EQ(p.filesystem.tmpfs, base.filesystem.tmpfs);
    EXPECT_EQ(p.env.set, (std::map<std::string, std::string>{{"FOO", "bar"}}));  // maps too
    EXPECT_EQ(p.env.pass, base.env.pass);
    EXPECT_EQ(p.extends_chain, std::vector<std::string>{"default"});
    EXPECT_EQ(p.name, "t");  // not "default": a name is never inherited
}

TEST(PolicyExtends, UnlimitedClearsAnInheritedLimit) {
    Policy p = parse_ok(
        "extends: strict\nlimits: { memory: unlimited, pids: null }\ntimeouts: { session: none "
        "}\n");
    EXPECT_FALSE(p.limits.memory.has_value());
    EXPECT_FALSE(p.limits.pids.has_value());
    EXPECT_FALSE(p.timeouts.session.has_value());
    EXPECT_EQ(p.limits.open_files, 1024u);
    EXPECT_EQ(p.extends_chain, (std::vector<std::string>{"strict", "default"}));
}

TEST(PolicyExtends, UnknownPresetListsThePresets) {
    expect_error("extends: defualt\n", 1, 10, "extends", "presets: default, none, strict");
}

TEST(PolicyExtends, InlineRelativeFileIsAnError) {
    expect_error("extends: base.yaml\n", 1, 10, "extends", "given inline");
}

TEST(PolicyExtends, FromFileRelativeToTheExtendingFile) {
    PolicyDir dir;
    dir.write("shared/base.yaml", "extends: strict\nlimits: { memory: 3Gi }\n");
    std::string child =
        dir.write("jobs/ci.yaml", "extends: ../shared/base.yaml\nlimits: { pids: 99 }\n");
    PolicyParseResult result = parse_policy_file(child);
    ASSERT_TRUE(result.ok()) << result.format_errors();
    EXPECT_EQ(result.policy->limits.memory, 3ull << 30);
    EXPECT_EQ(result.policy->limits.pids, 99u);
    EXPECT_EQ(result.policy->limits.open_files, 1024u);  // from strict
    EXPECT_EQ(result.policy->name, "ci");
    ASSERT_EQ(result.policy->extends_chain.size(), 3u);
    EXPECT_EQ(result.policy->extends_chain[0], (dir / "shared/base.yaml").string());
    EXPECT_EQ(result.policy->extends_chain[1], "strict");
    EXPECT_EQ(result.policy->extends_chain[2], "default");
}

TEST(PolicyExtends, ErrorsInTheParentNameTheParentFile) {
    PolicyDir dir;
    std::string parent = dir.write("base.yaml", "limits:\n  memory: huge\n");
    std::string child = dir.write("ci.yaml", "extends: base.yaml\n");
    PolicyParseResult result = parse_policy_file(child);
    ASSERT_EQ(result.diagnostics.size(), 2u) << result.format_errors();
    EXPECT_EQ(result.diagnostics[0].file, parent);
    EXPECT_EQ(result.diagnostics[0].line, 2);
    EXPECT_EQ(result.diagnostics[0].key, "limits.memory");
    EXPECT_EQ(result.diagnostics[1].file, child);
    EXPECT_EQ(result.diagnostics[1].key, "extends");
}

TEST(PolicyExtends, CycleIsAnErrorNamingTheChain) {
    PolicyDir dir;
    std::string a = dir.write("a.yaml", "extends: b.yaml\n");
    std::string b = dir.write("b.yaml", "extends: ./a.yaml\n");
    PolicyParseResult result = parse_policy_file(a);
    ASSERT_FALSE(result.ok());
    EXPECT_THAT(result.format_errors(), HasSubstr("extends cycle: " + a + " -> " + b + " -> " + a));
}

TEST(PolicyExtends, SelfExtensionIsACycle) {
    PolicyDir dir;
    std::string a = dir.write("self.yaml", "extends: self.yaml\n");
    PolicyParseResult result = parse_policy_file(a);
    ASSERT_EQ(result.diagnostics.size(), 1u) << result.format_errors();
    EXPECT_THAT(result.diagnostics[0].message, HasSubstr("extends cycle"));
    EXPECT_EQ(result.diagnostics[0].line, 1);
    EXPECT_EQ(result.diagnostics[0].column, 10);
}

TEST(PolicyExtends, MissingParentIsAnErrorNamingTheChain) {
    PolicyDir dir;
    std::string a = dir.write("a.yaml", "extends: b.yaml\n");
    dir.write("b.yaml", "extends: missing.yaml\n");
    PolicyParseResult result = parse_policy_file(a);
    ASSERT_FALSE(result.ok());
    std::string errors = result.format_errors();
    EXPECT_THAT(errors, HasSubstr(a + " -> " + (dir / "b.yaml").string() + " -> " +
                                  (dir / "missing.yaml").string()));
    EXPECT_THAT(errors, HasSubstr("ENOENT"));
}

// ---- confined: policies sent to the daemon (issue 10 item 2) ----

TEST(ConfinedPolicy, AbsoluteAndClimbingParentsAreRefusedWithoutLookingAtThem) {
    PolicyDir dir;
    PolicyDir outside;
    std::string secret = outside.write("secret.yaml", "name: SECRET-CONTENT\n");
    for (const std::string& target :
         {secret, std::string("/etc/shadow"),
          std::string("../") + fs::path(outside.path()).filename().string() + "/secret.yaml",
          std::string("a/../../x.yaml")}) {
        PolicyParseResult result = parse_confined_policy(std::string("extends: ") + target + "\n",
                                                         "<request>", dir.path());
        ASSERT_EQ(result.diagnostics.size(), 1u) << result.format_errors();
        EXPECT_EQ(result.diagnostics[0].key, "extends");
        EXPECT_THAT(result.diagnostics[0].message,
                    HasSubstr("absolute paths and `..` are refused"));
        EXPECT_THAT(result.format_errors(), ::testing::Not(HasSubstr("SECRET")));
    }
}

TEST(ConfinedPolicy, PresetsNamesAndRelativePathsInsideTheDir) {
    PolicyDir dir;
    dir.write("base.yaml", "extends: strict\nlimits: { pids: 42 }\n");
    dir.write("teams/web.yml", "extends: ../base.yaml\n");
    const std::string root = dir.path();
    for (const char* target : {"base", "base.yaml", "teams/web.yml"}) {
        PolicyParseResult result =
            parse_confined_policy(std::string("extends: ") + target + "\n", "<r>", root);
        ASSERT_TRUE(result.ok()) << target << ": " << result.format_errors();
        EXPECT_EQ(result.policy->limits.pids, 42u);
    }
    EXPECT_TRUE(parse_confined_policy("extends: strict\n", "<r>", root).ok());
    EXPECT_TRUE(parse_confined_policy("extends: strict\n", "<r>", "").ok());
    PolicyParseResult missing = parse_confined_policy("extends: nothing\n", "<r>", root);
    ASSERT_EQ(missing.diagnostics.size(), 1u);
    EXPECT_THAT(missing.diagnostics[0].message, HasSubstr("no policy `nothing`"));
}

TEST(ConfinedPolicy, SymlinksOutOfTheDirAreNotFollowed) {
    PolicyDir dir;
    PolicyDir outside;
    std::string secret = outside.write("secret.yaml", "name: SECRET-CONTENT\nbogus: 1\n");
    fs::create_symlink(secret, dir / "abs.yaml");
    fs::create_symlink("../" + fs::path(outside.path()).filename().string() + "/secret.yaml",
                       dir / "rel.yaml");
    for (const char* target : {"abs", "rel.yaml"}) {
        PolicyParseResult result = parse_confined_policy(std::string("extends: ") + target + "\n",
                                                         "<r>", dir.path());
        ASSERT_FALSE(result.ok());
        EXPECT_THAT(result.format_errors(), HasSubstr("leads outside its directory"));
        EXPECT_THAT(result.format_errors(), ::testing::Not(HasSubstr("SECRET")));
    }
}

TEST(ConfinedPolicy, AnInvalidParentIsSummarizedNotQuoted) {
    PolicyDir dir;
    dir.write("broken.yaml", "limits: { pids: SECRET-VALUE }\n");
    PolicyParseResult result =
        parse_confined_policy("extends: broken\n", "<r>", dir.path());
    ASSERT_EQ(result.diagnostics.size(), 1u) << result.format_errors();
    EXPECT_EQ(result.diagnostics[0].file, "<r>");
    EXPECT_THAT(result.diagnostics[0].message,
                HasSubstr("parent policy `broken` of the policy dir is invalid (1 problem"));
    EXPECT_THAT(result.format_errors(), ::testing::Not(HasSubstr("SECRET")));
}

TEST(ConfinedPolicy, NonRegularFilesInTheDirAreRefused) {
    PolicyDir dir;
    ASSERT_EQ(::mkfifo((dir / "pipe.yaml").c_str(), 0600), 0);
    fs::create_directories(dir / "sub.yaml");
    PolicyParseResult fifo = parse_confined_policy("extends: pipe\n", "<r>", dir.path());
    EXPECT_THAT(fifo.format_errors(), HasSubstr("is a FIFO, not a regular file"));
    PolicyParseResult sub =
        parse_confined_policy("extends: sub.yaml\n", "<r>", dir.path());
    EXPECT_THAT(sub.format_errors(), HasSubstr("is a directory"));
}

TEST(NamedPolicy, NamesThePolicyDirThenPresetsAndRefusesPaths) {
    PolicyDir dir;
    dir.write("team.yaml", "extends: none\n");
    dir.write("strict.yaml", "extends: none\nlimits: { pids: 5 }\n");  // the dir wins
    const std::string root = dir.path();
    EXPECT_EQ(load_named_policy("team", root).policy->name, "team");
    EXPECT_EQ(load_named_policy("strict", root).policy->limits.pids, 5u);
    EXPECT_TRUE(load_named_policy("default", root).ok());
    EXPECT_TRUE(load_named_policy("default", "").ok());
    for (const char* path : {"/etc/shadow", "../team", "./team", ".hidden", ""}) {
        PolicyParseResult refused = load_named_policy(path, root);
        ASSERT_EQ(refused.diagnostics.size(), 1u) << path;
        EXPECT_EQ(refused.diagnostics[0].key, "policy");
        EXPECT_THAT(refused.diagnostics[0].message, HasSubstr("is not a policy name"));
    }
    EXPECT_THAT(load_named_policy("nope", root).format_errors(), HasSubstr("no policy `nope`"));
}

// corrald resolves a preset on its event loop when no policy-dir file may shadow it (issue 18):
// any file the name could mean, of any kind, sends it to load_named_policy; a bad name is refused
// there too, so it is "may hold" without a lookup.
TEST(NamedPolicy, PolicyDirMayHoldAnyFileTheNameCouldMean) {
    PolicyDir dir;
    const std::string root = dir.path();
    EXPECT_FALSE(policy_dir_may_hold("default", root));
    EXPECT_FALSE(policy_dir_may_hold("default", ""));
    EXPECT_FALSE(policy_dir_may_hold("default", root + "/missing"));
    dir.write("default.yaml", "extends: none\n");
    EXPECT_TRUE(policy_dir_may_hold("default", root));
    dir.write("strict.yml", "extends: none\n");
    EXPECT_TRUE(policy_dir_may_hold("strict", root));
    fs::create_symlink("nowhere.yaml", dir / "none.yaml");  // dangling: still an entry
    EXPECT_TRUE(policy_dir_may_hold("none", root));
    fs::create_directories(dir / "a");
    dir.write("a/b.yaml", "extends: none\n");
    for (const char* name : {"a/b", "../x", "./default", ".hidden", ""})
        EXPECT_TRUE(policy_dir_may_hold(name, root)) << name;
    EXPECT_FALSE(policy_dir_may_hold("other", root));
}

// ---- bounds: size, aliases, diagnostics, durations ----

TEST(PolicyBounds, DocumentsOverOneMebibyteAreRefusedBeforeParsing) {
    std::string big = "name: big\n# " + std::string(kMaxPolicyBytes, 'x') + "\n";
    PolicyParseResult result = parse(big);
    ASSERT_EQ(result.diagnostics.size(), 1u);
    EXPECT_THAT(result.diagnostics[0].message, HasSubstr("more than the limit of 1048576"));
}

TEST(PolicyBounds, FilesAreReadOnlyWhenRegularAndSmall) {
    PolicyDir dir;
    std::string big = dir.write("big.yaml", std::string(kMaxPolicyBytes + 1, '#'));
    EXPECT_THAT(parse_policy_file(big).format_errors(), HasSubstr("more than the limit"));
    EXPECT_THAT(parse_policy_file("/dev/zero").format_errors(), HasSubstr("character device"));
    std::string child = dir.write("child.yaml", "extends: /dev/zero\n");
    EXPECT_THAT(parse_policy_file(child).format_errors(), HasSubstr("character device"));
    ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
    ASSERT_EQ(::chdir(dir.path().c_str()), 0);
    EXPECT_THAT(load_policy("./fifo").format_errors(), HasSubstr("FIFO"));
    // A bare word is a name, never a file of the current directory (a planted `default` must
    // not become the policy); the answer says how to mean the file, without opening it.
    EXPECT_THAT(load_policy("fifo").format_errors(), HasSubstr("./fifo"));
    ASSERT_EQ(::chdir("/"), 0);
}

TEST(PolicyBounds, AliasesCannotMultiplyTheWorkOrTheDiagnostics) {
    // Billion laughs with YAML anchors: one 100 KB value named 5,000 times.
    std::string bomb = "x: &v \"" + std::string(100000, 'a') + "\"\n";
    PolicyParseResult unknown = parse(bomb);  // `x` is unknown: still one diagnostic
    EXPECT_EQ(unknown.diagnostics.size(), 1u);
    bomb = "v: &v \"" + std::string(100000, 'a') + "\"\nfilesystem:\n  hidden: [*v";
    for (int i = 0; i < 5000; ++i) bomb += ", *v";
    bomb += "]\n";
    PolicyParseResult result = parse(bomb);
    ASSERT_FALSE(result.ok());
    size_t total = 0;
    for (const auto& d : result.diagnostics) total += d.message.size();
    EXPECT_LE(result.diagnostics.size(), 102u);
    EXPECT_LT(total, 200000u);
    EXPECT_THAT(result.format_errors(), HasSubstr("more problems not shown"));
    std::string env = "env:\n  set:\n";
    std::string anchor = "    A0: &v \"" + std::string(400000, 'a') + "\"\n";
    env += anchor;
    for (int i = 1; i < 30000; ++i) env += "    A" + std::to_string(i) + ": *v\n";
    ASSERT_LT(env.size(), kMaxPolicyBytes);
    EXPECT_THAT(parse(env).format_errors(), HasSubstr("YAML aliases"));
}

TEST(PolicyBounds, DurationsBeyondAYearAreOutOfRange) {
    expect_error("timeouts: { command: 999999999d }\n", 1, 22, "timeouts.command",
                 "longer than 365d");
    EXPECT_EQ(parse_ok("timeouts: { session: 365d }\n").timeouts.session,
              Millis(365LL * 24 * 3600 * 1000));
}

// ---- loading and writing ----

TEST(LoadPolicy, PresetNameFileOrAListOfPresets) {
    EXPECT_EQ(load_policy("strict").policy->name, "strict");
    PolicyDir dir;
    std::string file = dir.write("mine.yaml", "name: mine\n");
    EXPECT_EQ(load_policy(file).policy->name, "mine");
    PolicyParseResult unknown = load_policy("nope");
    ASSERT_EQ(unknown.diagnostics.size(), 1u);
    EXPECT_THAT(unknown.diagnostics[0].message, HasSubstr("default, none, strict"));
    PolicyParseResult missing = load_policy("nope.yaml");
    ASSERT_EQ(missing.diagnostics.size(), 1u);
    EXPECT_THAT(missing.diagnostics[0].message, HasSubstr("cannot read"));
}

TEST(PolicyDiagnostic, FormatsWithAndWithoutPosition) {
    EXPECT_EQ((PolicyDiagnostic{"ci.yaml", 4, 11, "limits.memory", "bad"}).format(),
              "ci.yaml:4:11: limits.memory: bad");
    EXPECT_EQ((PolicyDiagnostic{"ci.yaml", 0, 0, "", "cannot read"}).format(),
              "ci.yaml: cannot read");
}

TEST(PolicyToYaml, EveryFieldRoundTrips) {
    Policy p;
    p.name = "everything";
    p.user = UserSpec{false, 1000, 1001, {27, 100}};
    p.env.clear = false;
    p.env.set = {{"A", "yes"},      {"B", "~"},    {"C", ""},
                 {"D", "a: b # c"}, {"E", "0755"}, {"F", "'\"\n"}};
    p.env.pass = {"LANG", "TERM"};
    p.workdir = WorkdirSpec{3ull << 29, "/work"};
    p.limits.memory = 1536ull << 20;
    p.limits.swap = 0;
    p.limits.pids = 77;
    p.limits.cpu = 0.1;
    p.limits.io_weight = 500;
    p.limits.open_files = 4096;
    p.limits.core = 0;
    p.limits.file_size = 123'456'789;
    p.limits.processes = 300;
    p.limits.stack = 8ull << 20;
    p.limits.output = 1'000'000;
    p.limits.oom_group = true;
    p.timeouts = Timeouts{Millis(1500), Millis(90'061'001), Millis(60'000), Millis(0)};
    p.namespaces = NamespaceSpec{true, true, false, true, true, NetworkMode::isolated};
    p.filesystem.read_only = {"/", "/opt/with space"};
    p.filesystem.read_write = {"/var/cache/x"};
    p.filesystem.hidden = {"/home", "/weird#dir"};
    p.filesystem.tmpfs = {{"/tmp", 1ull << 20}, {"/var/tmp", 5'000'000}};
    p.filesystem.hostname = "box.local";
    p.network = NetworkSpec{3, {"127.0.0.1:5432", "[::1]:443"}};
    p.seccomp =
        SeccompSpec{"strict", {"ptrace", "@mount"}, {"@system-service"}, SeccompAction::log, 200};
    p.capabilities = CapabilitySpec{false, {"CAP_NET_BIND_SERVICE"}};
    p.landlock = LandlockSpec{{"/usr", "/etc"}, {"/work"}};
    p.enforcement = Enforcement::best_effort;
    std::string yaml = policy_to_yaml(p);
    PolicyParseResult again = parse(yaml);
    ASSERT_TRUE(again.ok()) << again.format_errors() << yaml;
    EXPECT_EQ(*again.policy, p) << yaml;
}

TEST(PolicyToYaml, ParsedPolicyRoundTrips) {
    Policy p = parse_ok(
        "extends: strict\nseccomp: { action: kill-process, errno: EACCES }\nlimits: { cpu: 2 }\n");
    PolicyParseResult again = parse(policy_to_yaml(p));
    ASSERT_TRUE(again.ok()) << again.format_errors();
    again.policy->extends_chain = p.extends_chain;
    EXPECT_EQ(*again.policy, p);
}

}  // namespace
}  // namespace corral

namespace corral {
namespace {

// Issue 17, item 1: the workdir keys of `corral run`.
TEST(PolicyParser, WorkdirFromAndOutputsAreReadAndChecked) {
    Policy copy = parse_ok(
        "namespaces: { mount: true }\nworkdir: { from: copy, size: 1Gi, outputs: [a, b/c] }\n");
    EXPECT_EQ(copy.workdir.from, WorkdirFrom::copy);
    EXPECT_EQ(copy.workdir.outputs, (std::vector<std::string>{"a", "b/c"}));
    EXPECT_EQ(parse_ok("workdir: { size: 1Gi }\n").workdir.from, WorkdirFrom::cwd);

    expect_error("workdir: { from: bind }\n", 1, 18, "workdir.from", "cwd");
    expect_error("namespaces: { mount: true }\nworkdir: { from: copy, outputs: [../etc] }\n", 2,
                 34, "workdir.outputs[0]", "without `..`");
    expect_error("namespaces: { mount: true }\nworkdir: { from: copy, outputs: [/etc] }\n", 2, 34,
                 "workdir.outputs[0]", "relative");
    expect_error("workdir: { outputs: [a] }\n", 1, 12, "workdir.outputs", "workdir.from: copy");
    expect_error("workdir: { from: copy }\n", 1, 12, "workdir.from", "namespaces.mount");
}

}  // namespace
}  // namespace corral
