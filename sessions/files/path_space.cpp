#include "sessions/files/path_space.hpp"

#include <vector>

namespace corral {

Result<std::string> normalize_sandbox_path(std::string_view path, std::string_view cwd) {
    if (path.empty()) return sys_error(EINVAL, "path is empty");
    if (path.find('\0') != std::string_view::npos)
        return sys_error(EINVAL, "path contains a NUL byte");
    std::string joined = path.front() == '/' ? std::string(path)
                                             : std::string(cwd) + "/" + std::string(path);
    std::vector<std::string_view> parts;
    std::string_view rest = joined;
    while (!rest.empty()) {
        const size_t slash = rest.find('/');
        const std::string_view part = rest.substr(0, slash);
        rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
        if (part.empty() || part == ".") continue;
        if (part == "..") {
            if (!parts.empty()) parts.pop_back();
            continue;
        }
        parts.push_back(part);
    }
    std::string out;
    for (auto part : parts) {
        out += '/';
        out += part;
    }
    return out.empty() ? std::string("/") : out;
}

PathSpace::PathSpace(std::string workspace, std::shared_ptr<FileService> workspace_files,
                     std::shared_ptr<FileService> sandbox_files)
    : workspace_(std::move(workspace)),
      workspace_files_(std::move(workspace_files)),
      sandbox_files_(std::move(sandbox_files)) {}

Result<FileTarget> PathSpace::resolve(std::string_view path, std::string_view cwd) const {
    auto normal = normalize_sandbox_path(path, cwd);
    if (!normal) {
        return sys_error(normal.error().code,
                         "path `" + std::string(path) + "`: " + normal.error().message);
    }
    const bool in_workspace = *normal == workspace_ ||
                              (normal->size() > workspace_.size() &&
                               normal->compare(0, workspace_.size(), workspace_) == 0 &&
                               (*normal)[workspace_.size()] == '/') ||
                              workspace_ == "/";
    if (in_workspace) return FileTarget{workspace_files_, std::move(*normal)};
    if (sandbox_files_) return FileTarget{sandbox_files_, std::move(*normal)};
    return sys_error(EXDEV, "path `" + std::string(path) + "` (" + *normal +
                                ") is outside the session's workspace " + workspace_ +
                                ": without a mount namespace the file API reaches only the "
                                "workspace, it escapes the session root");
}

}  // namespace corral
