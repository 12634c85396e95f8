#include "isolation/seccomp_cache.hpp"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <seccomp.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/unique_fd.hpp"
#include "isolation/confinement.hpp"

namespace corral {
namespace {

constexpr char kMagic[] = "corral-seccomp-cache 1\n";
constexpr size_t kMaxProgram = BPF_MAXINSNS;  // the kernel refuses longer programs anyway
// Canonical keys are a few KiB at most (every syscall name once); longer ones are not cached.
constexpr size_t kMaxKey = 64 << 10;
// Entries are a few KiB; every rebuilt binary and every policy adds one until the next boot.
constexpr size_t kMaxEntries = 256;

uint64_t fnv1a(const void* data, size_t size, uint64_t hash = 1469598103934665603ull) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < size; ++i) {
        hash ^= bytes[i];
        hash *= 1099511628211ull;
    }
    return hash;
}

// The GNU build id of the main program, as hex ("" without one). dl_iterate_phdr lists the main
// program first, in static binaries too.
int find_build_id(dl_phdr_info* info, size_t, void* out) {
    auto& id = *static_cast<std::string*>(out);
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
        const char* end = p + ph.p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const char* name = p + sizeof(ElfW(Nhdr));
            const char* desc = name + ((note->n_namesz + 3) & ~3u);
            if (desc + note->n_descsz > end) break;
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
                std::memcmp(name, "GNU", 4) == 0) {
                static constexpr char hex[] = "0123456789abcdef";
                for (unsigned j = 0; j < note->n_descsz; ++j) {
                    const auto byte = static_cast<unsigned char>(desc[j]);
                    id.push_back(hex[byte >> 4]);
                    id.push_back(hex[byte & 15]);
                }
                return 1;
            }
            p = desc + ((note->n_descsz + 3) & ~3u);
        }
    }
    return 1;  // only the main program counts
}

const std::string& build_id() {
    static const std::string id = [] {
        std::string out;
        dl_iterate_phdr(find_build_id, &out);
        return out;
    }();
    return id;
}

// Length-prefixed, so no name can run into the next field.
void put_field(std::string& key, const char* label, const std::string& value) {
    key += label;
    key += '=';
    key += std::to_string(value.size());
    key += ':';
    key += value;
    key += '\n';
}

void put_list(std::string& key, const char* label, const std::vector<std::string>& names) {
    put_field(key, label, std::to_string(names.size()));
    for (const std::string& name : names) put_field(key, label, name);
}

std::string file_name(const std::string& key) {
    static constexpr char hex[] = "0123456789abcdef";
    uint64_t hash = fnv1a(key.data(), key.size());
    std::string name = "seccomp-";
    for (int shift = 60; shift >= 0; shift -= 4) name.push_back(hex[(hash >> shift) & 15]);
    return name + ".bpf";
}

// A directory the caller alone can write, not a symlink.
UniqueFd open_private_dir(const std::string& path) {
    UniqueFd dir(open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir) return {};
    struct stat st{};
    if (fstat(dir.get(), &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 022) != 0) return {};
    return dir;
}

bool read_all(int fd, std::string& out, size_t limit) {
    char chunk[8192];
    for (;;) {
        ssize_t got = read(fd, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return false;
        if (got == 0) return true;
        if (out.size() + static_cast<size_t>(got) > limit) return false;
        out.append(chunk, static_cast<size_t>(got));
    }
}

template <class T>
bool take(const std::string& data, size_t& pos, T& value) {
    if (data.size() - pos < sizeof value) return false;
    std::memcpy(&value, data.data() + pos, sizeof value);
    pos += sizeof value;
    return true;
}

std::optional<std::vector<sock_filter>> load(int dir, const std::string& key) {
    UniqueFd fd(
        openat(dir, file_name(key).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd) return std::nullopt;
    struct stat st{};
    if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
        return std::nullopt;
    std::string data;
    const size_t limit = sizeof kMagic + 4 + kMaxKey + 4 + kMaxProgram * sizeof(sock_filter) + 8;
    if (!read_all(fd.get(), data, limit)) return std::nullopt;

    const size_t magic = sizeof kMagic - 1;
    if (data.size() < magic + 8 || data.compare(0, magic, kMagic) != 0) return std::nullopt;
    uint64_t checksum = 0;
    std::memcpy(&checksum, data.data() + data.size() - 8, 8);
    if (fnv1a(data.data(), data.size() - 8) != checksum) return std::nullopt;
    data.resize(data.size() - 8);

    size_t pos = magic;
    uint32_t key_size = 0, count = 0;
    if (!take(data, pos, key_size) || key_size != key.size() || data.size() - pos < key_size ||
        data.compare(pos, key_size, key) != 0)
        return std::nullopt;
    pos += key_size;
    if (!take(data, pos, count) || count > kMaxProgram ||
        data.size() - pos != count * sizeof(sock_filter))
        return std::nullopt;
    std::vector<sock_filter> program(count);
    if (count != 0) std::memcpy(program.data(), data.data() + pos, count * sizeof(sock_filter));
    return program;
}

// Past kMaxEntries the other entries go (a miss is only a compile): the cache stays bounded
// without tracking ages. Only names the cache itself writes are touched.
void prune(int dir, const std::string& keep) {
    UniqueFd listing(openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!listing) return;
    DIR* stream = fdopendir(listing.get());
    if (stream == nullptr) return;
    listing.release();
    std::vector<std::string> names;
    while (dirent* entry = readdir(stream)) {
        std::string_view name = entry->d_name;
        if (name.starts_with("seccomp-") && name != keep) names.emplace_back(name);
    }
    closedir(stream);
    if (names.size() + 1 <= kMaxEntries) return;
    for (const std::string& name : names) unlinkat(dir, name.c_str(), 0);
}

void store(int dir, const std::string& key, const std::vector<sock_filter>& program) {
    if (key.size() > kMaxKey || program.size() > kMaxProgram) return;
    std::string data(kMagic, sizeof kMagic - 1);
    const auto key_size = static_cast<uint32_t>(key.size());
    const auto count = static_cast<uint32_t>(program.size());
    data.append(reinterpret_cast<const char*>(&key_size), sizeof key_size);
    data += key;
    data.append(reinterpret_cast<const char*>(&count), sizeof count);
    data.append(reinterpret_cast<const char*>(program.data()),
                program.size() * sizeof(sock_filter));
    const uint64_t checksum = fnv1a(data.data(), data.size());
    data.append(reinterpret_cast<const char*>(&checksum), sizeof checksum);

    const std::string name = file_name(key);
    const std::string temp = name + ".tmp." + std::to_string(getpid());
    UniqueFd fd(
        openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) return;
    bool ok = write(fd.get(), data.data(), data.size()) == static_cast<ssize_t>(data.size());
    fd.reset();
    // rename replaces an entry atomically: a concurrent reader sees the old file or the new one.
    if (!ok || renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
        unlinkat(dir, temp.c_str(), 0);
        return;
    }
    prune(dir, name);
}

// Root's cache directory, created on first use: /run is a tmpfs, so entries live for one boot.
std::optional<std::string> root_cache_dir() {
    mkdir("/run/corral", 0755);
    mkdir("/run/corral/cache", 0700);
    return std::string("/run/corral/cache");
}

}  // namespace

std::optional<std::string> default_seccomp_cache_dir() {
    if (geteuid() == 0) return root_cache_dir();
    const char* runtime = std::getenv("XDG_RUNTIME_DIR");
    if (runtime == nullptr || runtime[0] != '/') return std::nullopt;
    std::string dir = std::string(runtime) + "/corral-cache";
    mkdir(dir.c_str(), 0700);
    return dir;
}

std::string seccomp_cache_key(const SeccompSpec& spec) {
    if (build_id().empty()) return "";
    // Every field of the spec is part of the key: a field added to SeccompSpec makes this
    // binding fail to compile until it joins the key (two specs that compile differently must
    // never share an entry).
    const auto& [preset, deny, allow, action, errno_value, ptrace_own] = spec;
    // Sorted and without repeats: the same filter gets one entry, and a policy that repeats a
    // name a million times cannot make a huge one.
    auto canonical = [](const std::vector<std::string>& names) {
        std::vector<std::string> out(names);
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
        return out;
    };
    utsname host{};
    uname(&host);
    const scmp_version* library = seccomp_version();  // a dynamically linked libseccomp's fix
    std::string key;
    // The entry holds the marked program (seccomp_refusals.hpp), whose counted answers differ
    // from the plain filter's: a format of its own.
    put_field(key, "program", "marked-refusals");
    put_field(key, "build", build_id());
    put_field(key, "libseccomp", library == nullptr ? "?"
                                                    : std::to_string(library->major) + "." +
                                                          std::to_string(library->minor) + "." +
                                                          std::to_string(library->micro));
    put_field(key, "kernel", host.release);
    put_field(key, "machine", host.machine);
    put_field(key, "preset", preset);
    put_field(key, "action", std::to_string(static_cast<int>(action)));
    put_field(key, "errno", std::to_string(errno_value));
    put_field(key, "ptrace_own", ptrace_own ? "1" : "0");
    put_list(key, "deny", canonical(deny));
    put_list(key, "allow", canonical(allow));
    return key;
}

Result<std::vector<sock_filter>> compile_seccomp_cached(
    const SeccompSpec& spec, const std::optional<std::string>& cache_dir) {
    const std::string key = cache_dir ? seccomp_cache_key(spec) : std::string();
    UniqueFd dir = key.empty() ? UniqueFd() : open_private_dir(*cache_dir);
    if (dir) {
        if (auto cached = load(dir.get(), key)) return std::move(*cached);
    }
    auto program = compile_marked_seccomp(spec);
    if (program && dir) store(dir.get(), key, *program);
    return program;
}

}  // namespace corral
