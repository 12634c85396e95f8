// The journal file (sessions/recovery/journal.hpp) and its records (journal_records.hpp): framing,
// a torn tail cut at every byte, corruption, versions, trust checks, compaction and replay.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sessions/recovery/journal.hpp"
#include "sessions/recovery/journal_records.hpp"
#include "tests/support/temp_dir.hpp"

namespace corral {
namespace {

using nlohmann::json;

class JournalTest : public ::testing::Test {
  protected:
    void SetUp() override { ASSERT_FALSE(dir_.empty()); }
    std::string bytes() const {
        std::ifstream in(path_, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    }
    void write_bytes(const std::string& data) const {
        std::ofstream(path_, std::ios::binary | std::ios::trunc) << data;
        ::chmod(path_.c_str(), 0600);
    }
    test_support::TempDir temp_{"corral-journal-test"};
    const std::string dir_ = temp_.path();
    const std::string path_ = dir_ + "/journal";
};

JournalSession sample_session(const std::string& id) {
    JournalSession s;
    s.id = id;
    s.policy = "none";
    s.created_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000000));
    s.env = {{"A", "1"}, {"B", "two words"}};
    s.cwd = "/workspace";
    s.command_timeout_ms = 5000;
    s.ports = {40001, 40002};
    s.full_token = "cor_full_0123456789abcdef";
    s.restricted_token = "cor_rest_0123456789abcdef";
    s.holder_pid = 1234;
    s.holder_start_ticks = 99;
    s.identity = std::pair<uid_t, gid_t>{100000, 100000};
    s.next_process = 3;
    return s;
}

TEST_F(JournalTest, MissingFileIsAnEmptyJournal) {
    auto read = read_journal(path_);
    ASSERT_TRUE(read) << read.error().describe();
    EXPECT_TRUE(read->records.empty());
    EXPECT_EQ(read->valid_bytes, 0u);
}

TEST_F(JournalTest, RecordsRoundTripAndReplayIntoTheirSessions) {
    auto journal = Journal::open(path_, 0, JournalSync::none);
    ASSERT_TRUE(journal) << journal.error().describe();
    JournalSession s = sample_session("s1");
    ASSERT_TRUE(journal->append(session_record(s)));
    JournalProcess p;
    p.id = "p1";
    p.pid = 4321;
    p.start_ticks = 77;
    p.argv = {"/bin/sh", "-c", "sleep 1"};
    p.timeout_ms = 1000;
    ASSERT_TRUE(journal->append(process_record("s1", p)));
    ASSERT_TRUE(journal->append(exit_record("s1", "p1", JournalExit{"exited", 3, std::nullopt, 12, "", ""})));
    ASSERT_TRUE(journal->append(session_record(sample_session("gone"))));
    ASSERT_TRUE(journal->append(end_record("gone")));

    auto read = read_journal(path_);
    ASSERT_TRUE(read) << read.error().describe();
    EXPECT_EQ(read->version, kJournalVersion);
    EXPECT_EQ(read->ignored_bytes, 0u);
    std::vector<std::string> notes;
    auto sessions = replay_journal(read->records, notes);
    EXPECT_TRUE(notes.empty());
    ASSERT_EQ(sessions.size(), 1u);
    const JournalSession& got = sessions.at("s1");
    EXPECT_EQ(got.env, s.env);
    EXPECT_EQ(got.ports, s.ports);
    EXPECT_EQ(got.full_token, s.full_token);
    EXPECT_EQ(got.created_at, s.created_at);
    EXPECT_EQ(got.holder_pid, 1234);
    ASSERT_TRUE(got.identity);
    EXPECT_EQ(got.identity->first, 100000u);
    ASSERT_EQ(got.processes.size(), 1u);
    EXPECT_EQ(got.processes[0].pid, 4321);
    EXPECT_EQ(got.processes[0].start_ticks, 77u);
    ASSERT_TRUE(got.processes[0].exit);
    EXPECT_EQ(got.processes[0].exit->exit_code, 3);
}

// The slots of the session holder's descriptor store that keep a process's output (issue 12.2)
// come back with it; a record from before them has none; a forged slot that would name the
// holder's own descriptors (its store channel) or lie past the last slot is dropped, not trusted.
TEST_F(JournalTest, HeldOutputSlotsRoundTripAndForgedOnesAreDropped) {
    auto journal = Journal::open(path_, 0, JournalSync::none);
    ASSERT_TRUE(journal) << journal.error().describe();
    JournalSession keeper = sample_session("s1");
    keeper.keeper = true;
    ASSERT_TRUE(journal->append(session_record(keeper)));
    JournalProcess held;
    held.id = "p1";
    held.pid = 4321;
    held.held_slot = 18;
    ASSERT_TRUE(journal->append(process_record("s1", held)));
    JournalProcess plain;
    plain.id = "p2";
    plain.pid = 4322;
    ASSERT_TRUE(journal->append(process_record("s1", plain)));
    for (int forged : {5, 15, -1, 1 << 20}) {
        json record = process_record("s1", plain);
        record["id"] = "p" + std::to_string(3 + (forged & 7));
        record["heldSlot"] = forged;
        ASSERT_TRUE(journal->append(record));
    }
    auto read = read_journal(path_);
    ASSERT_TRUE(read) << read.error().describe();
    std::vector<std::string> notes;
    auto sessions = replay_journal(read->records, notes);
    ASSERT_EQ(sessions.count("s1"), 1u);
    EXPECT_TRUE(sessions.at("s1").keeper);
    const auto& processes = sessions.at("s1").processes;
    ASSERT_GE(processes.size(), 3u);
    EXPECT_EQ(processes[0].held_slot, 18);
    EXPECT_FALSE(processes[1].held_slot);
    for (size_t i = 2; i < processes.size(); ++i) EXPECT_FALSE(processes[i].held_slot) << i;
    // A compaction snapshot keeps it.
    JournalSession state = sessions.at("s1");
    bool found = false;
    for (const json& record : journal_snapshot(state))
        if (record.value("id", "") == "p1") found = record.at("heldSlot") == 18;
    EXPECT_TRUE(found);
}

// A crash can stop a write() anywhere: every prefix of the file must read as the records that
// are whole in it, the rest ignored with a note, and reopening cuts the torn tail off.
TEST_F(JournalTest, ATailTornAtAnyByteIsIgnored) {
    auto journal = Journal::open(path_, 0, JournalSync::none);
    ASSERT_TRUE(journal);
    ASSERT_TRUE(journal->append(session_record(sample_session("s1"))));
    const uint64_t whole = journal->size();
    ASSERT_TRUE(journal->append(session_record(sample_session("s2"))));
    const std::string full = bytes();
    for (size_t cut = whole; cut < full.size(); ++cut) {
        write_bytes(full.substr(0, cut));
        auto read = read_journal(path_);
        ASSERT_TRUE(read) << cut;
        EXPECT_EQ(read->records.size(), 1u) << cut;
        EXPECT_EQ(read->valid_bytes, whole) << cut;
        EXPECT_EQ(read->ignored_bytes, cut - whole) << cut;
        if (cut > whole) {
            EXPECT_FALSE(read->notes.empty()) << cut;
        }
    }
    write_bytes(full.substr(0, full.size() - 3));
    auto read = read_journal(path_);
    ASSERT_TRUE(read);
    auto reopened = Journal::open(path_, read->valid_bytes, JournalSync::none);
    ASSERT_TRUE(reopened);
    ASSERT_TRUE(reopened->append(end_record("s1")));
    auto again = read_journal(path_);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->ignored_bytes, 0u);
    ASSERT_EQ(again->records.size(), 2u);
    EXPECT_EQ(again->records[1]["t"], "end");
}

TEST_F(JournalTest, ACorruptOrOversizedRecordEndsTheReadThere) {
    auto journal = Journal::open(path_, 0, JournalSync::none);
    ASSERT_TRUE(journal);
    ASSERT_TRUE(journal->append(session_record(sample_session("s1"))));
    const uint64_t whole = journal->size();
    ASSERT_TRUE(journal->append(session_record(sample_session("s2"))));
    std::string data = bytes();
    data[data.size() - 5] ^= 0x20;  // a flipped bit in the payload: the checksum says so
    write_bytes(data);
    auto read = read_journal(path_);
    ASSERT_TRUE(read);
    EXPECT_EQ(read->records.size(), 1u);
    EXPECT_EQ(read->valid_bytes, whole);

    std::string huge = bytes().substr(0, whole);
    huge += std::string("\xff\xff\xff\x7f\0\0\0\0", 8);  // claims 2 GiB
    write_bytes(huge);
    read = read_journal(path_);
    ASSERT_TRUE(read);
    EXPECT_EQ(read->records.size(), 1u);
    ASSERT_FALSE(read->notes.empty());
    EXPECT_NE(read->notes[0].find("claiming"), std::string::npos) << read->notes[0];
}

TEST_F(JournalTest, ANewerReaderIsRefusedAndNewerFieldsAndRecordsAreIgnored) {
    std::string data = frame_journal_record({{"t", "header"}, {"version", 9}, {"minReader", 1}});
    json session = session_record(sample_session("s1"));
    session["someFutureField"] = {{"x", 1}};
    data += frame_journal_record(session);
    data += frame_journal_record({{"t", "futureRecord"}, {"sid", "s1"}});
    write_bytes(data);
    auto read = read_journal(path_);
    ASSERT_TRUE(read) << read.error().describe();
    EXPECT_EQ(read->version, 9);
    std::vector<std::string> notes;
    auto sessions = replay_journal(read->records, notes);
    EXPECT_EQ(sessions.size(), 1u);
    EXPECT_TRUE(notes.empty());

    write_bytes(frame_journal_record({{"t", "header"}, {"version", 9}, {"minReader", 9}}));
    read = read_journal(path_);
    ASSERT_FALSE(read);
    EXPECT_EQ(read.error().code, EPROTONOSUPPORT);
    EXPECT_NE(read.error().describe().find("reader of version 9"), std::string::npos);
}

// Issue 12 item 2: a journal someone else could write is not the daemon's and is not believed.
TEST_F(JournalTest, AJournalOthersCanWriteOrALinkIsRefused) {
    write_bytes(frame_journal_record({{"t", "header"}, {"version", 1}}));
    ::chmod(path_.c_str(), 0666);
    auto read = read_journal(path_);
    ASSERT_FALSE(read);
    EXPECT_EQ(read.error().code, EPERM);
    EXPECT_NE(read.error().describe().find("writable by group or others"), std::string::npos);

    ::chmod(path_.c_str(), 0600);
    const std::string link = dir_ + "/link";
    ASSERT_EQ(::symlink(path_.c_str(), link.c_str()), 0);
    EXPECT_FALSE(read_journal(link));
    if (::geteuid() == 0) {
        ASSERT_EQ(::chown(path_.c_str(), 65534, 65534), 0);
        read = read_journal(path_);
        ASSERT_FALSE(read);
        EXPECT_NE(read.error().describe().find("owned by uid 65534"), std::string::npos);
    }
}

TEST_F(JournalTest, CompactionLeavesOnlyTheSnapshot) {
    auto journal = Journal::open(path_, 0, JournalSync::data);
    ASSERT_TRUE(journal);
    for (int i = 0; i < 50; ++i)
        ASSERT_TRUE(journal->append(session_record(sample_session("s" + std::to_string(i)))));
    const uint64_t before = journal->size();
    ASSERT_TRUE(journal->compact(journal_snapshot(sample_session("kept"))));
    EXPECT_LT(journal->size(), before);
    ASSERT_TRUE(journal->append(end_record("kept")));
    auto read = read_journal(path_);
    ASSERT_TRUE(read);
    ASSERT_EQ(read->records.size(), 2u);
    EXPECT_EQ(read->records[0]["sid"], "kept");
    EXPECT_FALSE(std::filesystem::exists(path_ + ".tmp"));
    struct stat st {};
    ASSERT_EQ(::stat(path_.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Nothing in a record may name a path: ids that could climb out of the instance are skipped.
TEST_F(JournalTest, ReplaySkipsBadIdsAndOrphanRecords) {
    std::vector<json> records;
    json bad = session_record(sample_session("s1"));
    bad["sid"] = "../../../etc";
    records.push_back(bad);
    JournalProcess p;
    p.id = "p1";
    p.pid = 1;
    json proc = process_record("nosuch", p);
    records.push_back(proc);
    records.push_back(session_record(sample_session("ok")));
    json bad_proc = process_record("ok", p);
    bad_proc["id"] = "../holder";
    records.push_back(bad_proc);
    json no_tokens = session_record(sample_session("short"));
    no_tokens["fullToken"] = "x";
    records.push_back(no_tokens);
    std::vector<std::string> notes;
    auto sessions = replay_journal(records, notes);
    ASSERT_EQ(sessions.size(), 1u);
    EXPECT_TRUE(sessions.count("ok"));
    EXPECT_TRUE(sessions.at("ok").processes.empty());
    EXPECT_EQ(notes.size(), 4u);
}

TEST(JournalCrc, MatchesTheStandardCheckValue) {
    EXPECT_EQ(journal_crc32("123456789"), 0xCBF43926u);  // the CRC-32 check value
}

}  // namespace
}  // namespace corral
