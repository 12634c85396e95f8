#pragma once
// The daemon's journal file (DESIGN.md "Surviving the daemon"): an append-only sequence of
// records in <state_dir>/journal, each framed as
//
//     u32 length (little endian) | u32 CRC-32 of the payload | payload (one JSON object)
//
// so a record torn by a crash in the middle of its write() is recognised (short, or a checksum
// that does not match) and everything from it on is ignored. The first record is a header
// {"t":"header","version":N,"minReader":M}: a reader older than M refuses the file, any other
// reads what it knows and ignores record types and fields it does not (later versions add, they
// do not change meaning). When the file grows, compact() rewrites it as a header plus a snapshot
// into journal.tmp and renames it over the old one, so the file on disk is always one or the
// other, whole.
//
// Durability: a write() that returned is in the kernel's page cache and survives the daemon's
// death (kill -9, a crash) — the case the journal exists for. Only a host crash could lose it,
// and a host crash ends every session with it (nothing is left to re-adopt), so appends are not
// fsync'ed by default (JournalSync::none); compaction always syncs before its rename, so even a
// host crash leaves one whole file. JournalSync::data adds fdatasync to every append (measured in
// tests/bench/journal_bench.cpp).
//
// Trust: the file is the daemon's own. One that is not a regular file, not owned by the daemon's
// uid, or writable by group or others was written by someone else and is refused (issue 12 item
// 2's journal must never make the daemon adopt or kill what it does not own).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "base/unique_fd.hpp"

namespace corral {

/// The journal format this build writes.
inline constexpr int kJournalVersion = 1;
/// A record larger than this is not one of ours (a session record with its env is kilobytes).
inline constexpr uint32_t kJournalMaxRecord = 4u << 20;
/// A journal larger than this is refused whole rather than read (compaction keeps ours small).
inline constexpr uint64_t kJournalMaxFile = 256ull << 20;

/// When appends reach the disk.
enum class JournalSync { none, data };

/// CRC-32 (IEEE 802.3, the zlib polynomial) of `data`.
uint32_t journal_crc32(const std::string& data);
/// One framed record: length, checksum, payload.
std::string frame_journal_record(const nlohmann::json& record);

/// What reading a journal file found.
struct JournalContents {
    std::vector<nlohmann::json> records;  ///< in file order, the header excluded
    int version = 0;                      ///< of the header; 0 when there was no file
    uint64_t valid_bytes = 0;             ///< where the last whole record ends
    uint64_t ignored_bytes = 0;           ///< a torn or corrupt tail (left out)
    std::vector<std::string> notes;       ///< what was ignored and why, for the log
};

/// Reads `path`. A missing file is an empty journal; a file that is not ours (see the file
/// comment), too large, or written for a newer reader is an error naming why.
Result<JournalContents> read_journal(const std::string& path);

/// The open journal: appends, and compacts when asked.
class Journal {
  public:
    Journal() = default;
    /// Opens `path` for appending after its first `valid_bytes` (a torn tail is cut off), or
    /// starts a new file with a header when `valid_bytes` is 0.
    static Result<Journal> open(const std::string& path, uint64_t valid_bytes, JournalSync sync);
    /// Appends one record (one write()). The change it describes may take effect once this
    /// returned ok.
    Status append(const nlohmann::json& record);
    /// Rewrites the journal as a header plus `snapshot`, atomically (tmp file, fsync, rename).
    Status compact(const std::vector<nlohmann::json>& snapshot);
    /// Bytes in the file now, and right after the last compaction.
    uint64_t size() const { return size_; }
    uint64_t compacted_size() const { return compacted_size_; }
    bool valid() const { return fd_.valid(); }

  private:
    Status write_all(int fd, const std::string& bytes);
    std::string path_;
    UniqueFd fd_;
    JournalSync sync_ = JournalSync::none;
    uint64_t size_ = 0;
    uint64_t compacted_size_ = 0;
};

}  // namespace corral
