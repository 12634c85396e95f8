// The journal file: framing, reading with torn-tail detection, appending, compaction.
#include "sessions/recovery/journal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <filesystem>

namespace corral {
namespace {

constexpr uint32_t kHeaderSize = 8;

std::array<uint32_t, 256> make_crc_table() {
    std::array<uint32_t, 256> table{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    return table;
}

void put_u32(std::string& out, uint32_t value) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint32_t get_u32(const std::string& in, size_t at) {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i)
        value |= static_cast<uint32_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
    return value;
}

nlohmann::json header_record() {
    return {{"t", "header"}, {"version", kJournalVersion}, {"minReader", 1}};
}

/// The directory's entry for a renamed file is durable only once the directory is synced.
void sync_directory_of(const std::string& path) {
    const std::string dir = std::filesystem::path(path).parent_path().string();
    UniqueFd fd(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd) (void)::fsync(fd.get());
}

}  // namespace

uint32_t journal_crc32(const std::string& data) {
    static const std::array<uint32_t, 256> table = make_crc_table();
    uint32_t crc = 0xFFFFFFFFu;
    for (unsigned char byte : data) crc = table[(crc ^ byte) & 0xff] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

std::string frame_journal_record(const nlohmann::json& record) {
    const std::string payload = record.dump();
    std::string framed;
    framed.reserve(kHeaderSize + payload.size());
    put_u32(framed, static_cast<uint32_t>(payload.size()));
    put_u32(framed, journal_crc32(payload));
    framed += payload;
    return framed;
}

Result<JournalContents> read_journal(const std::string& path) {
    JournalContents contents;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (!fd) {
        if (errno == ENOENT) return contents;
        return sys_error("open journal `" + path + "`");
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return sys_error("stat journal `" + path + "`");
    if (!S_ISREG(st.st_mode))
        return sys_error(EPERM, "journal `" + path + "` is not a regular file");
    if (st.st_uid != ::geteuid())
        return sys_error(EPERM, "journal `" + path + "` is owned by uid " +
                                    std::to_string(st.st_uid) + ", not by this daemon's");
    if ((st.st_mode & 022) != 0)
        return sys_error(EPERM, "journal `" + path + "` is writable by group or others");
    if (static_cast<uint64_t>(st.st_size) > kJournalMaxFile)
        return sys_error(EFBIG, "journal `" + path + "` is " + std::to_string(st.st_size) +
                                    " bytes, more than any this daemon writes");
    std::string bytes(static_cast<size_t>(st.st_size), '\0');
    size_t have = 0;
    while (have < bytes.size()) {
        const ssize_t n = ::read(fd.get(), bytes.data() + have, bytes.size() - have);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return sys_error("read journal `" + path + "`");
        if (n == 0) break;
        have += static_cast<size_t>(n);
    }
    bytes.resize(have);

    size_t at = 0;
    bool header_seen = false;
    while (at < bytes.size()) {
        std::string why;
        if (bytes.size() - at < kHeaderSize) {
            why = "a record cut short";
        } else {
            const uint32_t length = get_u32(bytes, at);
            const uint32_t crc = get_u32(bytes, at + 4);
            if (length > kJournalMaxRecord) {
                why = "a record claiming " + std::to_string(length) + " bytes";
            } else if (bytes.size() - at - kHeaderSize < length) {
                why = "a record cut short";
            } else {
                std::string payload = bytes.substr(at + kHeaderSize, length);
                if (journal_crc32(payload) != crc) {
                    why = "a record whose checksum does not match";
                } else {
                    auto record = nlohmann::json::parse(payload, nullptr, false);
                    if (record.is_discarded() || !record.is_object()) {
                        why = "a record that is not a JSON object";
                    } else if (!header_seen) {
                        if (record.value("t", "") != "header" ||
                            !record["version"].is_number_integer()) {
                            return sys_error(EINVAL, "journal `" + path +
                                                         "` does not start with a header");
                        }
                        const int min_reader = record.value("minReader", 1);
                        if (min_reader > kJournalVersion)
                            return sys_error(EPROTONOSUPPORT,
                                             "journal `" + path + "` needs a reader of version " +
                                                 std::to_string(min_reader) + "; this one is " +
                                                 std::to_string(kJournalVersion));
                        contents.version = record["version"].get<int>();
                        header_seen = true;
                    } else {
                        contents.records.push_back(std::move(record));
                    }
                    if (why.empty()) {
                        at += kHeaderSize + length;
                        contents.valid_bytes = at;
                        continue;
                    }
                }
            }
        }
        contents.ignored_bytes = bytes.size() - at;
        contents.notes.push_back("journal `" + path + "`: ignored the last " +
                                 std::to_string(contents.ignored_bytes) + " bytes from offset " +
                                 std::to_string(at) + " (" + why + ": torn by a crash)");
        break;
    }
    if (!header_seen) contents.valid_bytes = 0;
    return contents;
}

Result<Journal> Journal::open(const std::string& path, uint64_t valid_bytes, JournalSync sync) {
    Journal journal;
    journal.path_ = path;
    journal.sync_ = sync;
    if (valid_bytes == 0) {
        CORRAL_TRY(journal.compact({}), "");
        return journal;
    }
    journal.fd_.reset(::open(path.c_str(), O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!journal.fd_) return sys_error("open journal `" + path + "`");
    // A torn tail goes, so the next record follows the last whole one.
    if (::ftruncate(journal.fd_.get(), static_cast<off_t>(valid_bytes)) != 0)
        return sys_error("truncate journal `" + path + "`");
    if (::lseek(journal.fd_.get(), 0, SEEK_END) < 0) return sys_error("seek journal");
    journal.size_ = valid_bytes;
    journal.compacted_size_ = valid_bytes;
    return journal;
}

Status Journal::write_all(int fd, const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return sys_error("write journal `" + path_ + "`");
        done += static_cast<size_t>(n);
    }
    return {};
}

Status Journal::append(const nlohmann::json& record) {
    if (!fd_) return plain_error("journal is not open");
    const std::string framed = frame_journal_record(record);
    CORRAL_TRY(write_all(fd_.get(), framed), "");
    size_ += framed.size();
    if (sync_ == JournalSync::data && ::fdatasync(fd_.get()) != 0)
        return sys_error("fdatasync journal `" + path_ + "`");
    return {};
}

Status Journal::compact(const std::vector<nlohmann::json>& snapshot) {
    const std::string tmp = path_ + ".tmp";
    (void)::unlink(tmp.c_str());
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd) return sys_error("create `" + tmp + "`");
    std::string bytes = frame_journal_record(header_record());
    for (const auto& record : snapshot) bytes += frame_journal_record(record);
    CORRAL_TRY(write_all(fd.get(), bytes), "compact");
    if (::fdatasync(fd.get()) != 0) return sys_error("fdatasync `" + tmp + "`");
    if (::rename(tmp.c_str(), path_.c_str()) != 0)
        return sys_error("rename `" + tmp + "` to `" + path_ + "`");
    sync_directory_of(path_);
    fd_ = std::move(fd);
    size_ = bytes.size();
    compacted_size_ = size_;
    return {};
}

}  // namespace corral
