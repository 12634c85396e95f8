#pragma once
// The records of code contexts (issue 14) as the session manager hands them to the API: what a
// context is, what a run asks, and the events a run produces. See code_context.hpp.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sessions/session_types.hpp"

namespace corral {

/// The interpreters a code context can run.
enum class CodeLanguage { python, javascript };
/// "python" / "javascript".
std::string_view to_string(CodeLanguage language);
/// The language named `name` ("python", "javascript"; "js" and "node" too), or nullopt.
std::optional<CodeLanguage> parse_code_language(std::string_view name);

/// POST /v1/sessions/{sid}/contexts.
struct CodeContextRequest {
    std::string id;  ///< [A-Za-z0-9_-]{1,64}; "" = generated ("c1", "c2", ...)
    CodeLanguage language = CodeLanguage::python;
    std::string cwd;                         ///< "" = session cwd; relative = against it
    std::map<std::string, std::string> env;  ///< on top of policy env + session env
};

/// A code context record (snapshot).
struct CodeContextInfo {
    std::string id;
    CodeLanguage language = CodeLanguage::python;
    std::string status;               ///< "starting", "idle", "running" or "dead"
    std::string process;              ///< id of the interpreter's process record ("p3")
    pid_t pid = -1;                   ///< host pid of the interpreter
    std::string cwd;                  ///< where it started, as the processes see it
    std::string version;              ///< the interpreter's version, once it is ready
    uint64_t runs = 0;                ///< runs finished in it
    size_t queued = 0;                ///< runs waiting for their turn
    std::string error;                ///< why it is dead ("" while it lives)
    std::optional<ProcessInfo> exit;  ///< the interpreter's final record, once it ended
};

/// POST .../contexts/{ctx}/run.
struct CodeRunRequest {
    std::string code;
    std::optional<Millis> timeout;  ///< nullopt = the session's command timeout; 0 = none
};

/// An exception the code raised.
struct CodeError {
    std::string name;
    std::string value;
    std::vector<std::string> traceback;
};

/// One event of a run, in the order the driver produced them; `end` is always the last.
struct CodeRunEvent {
    enum class Type { stdout_text, stderr_text, result, error, end };
    Type type = Type::end;
    std::string text;                         ///< stdout/stderr
    std::map<std::string, std::string> data;  ///< result: mime type -> value
    CodeError error;                          ///< error
    // end:
    std::string status;      ///< "ok", "error", "timeout" or "context_died"
    std::string message;     ///< context_died: why
    bool truncated = false;  ///< output or results beyond the policy's output cap were dropped
    uint64_t duration_ms = 0;
};

}  // namespace corral
