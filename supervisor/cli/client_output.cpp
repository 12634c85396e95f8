#include "supervisor/cli/client_output.hpp"

#include <algorithm>
#include <ostream>

namespace corral::cli {

void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) {
    std::vector<size_t> widths(header.size(), 0);
    auto widen = [&](const std::vector<std::string>& row) {
        for (size_t i = 0; i < row.size() && i < widths.size(); ++i)
            widths[i] = std::max(widths[i], row[i].size());
    };
    widen(header);
    for (const auto& row : rows) widen(row);
    auto print_row = [&](const std::vector<std::string>& row) {
        std::string line;
        for (size_t i = 0; i < widths.size(); ++i) {
            std::string cell = i < row.size() ? row[i] : "";
            line += cell;
            if (i + 1 < widths.size()) line += std::string(widths[i] - cell.size() + 2, ' ');
        }
        line.erase(line.find_last_not_of(' ') + 1);
        out << line << "\n";
    };
    print_row(header);
    for (const auto& row : rows) print_row(row);
}

std::string cell_text(const nlohmann::json& value, bool join_arrays) {
    if (value.is_null()) return "-";
    if (value.is_string()) return value.get<std::string>();
    if (value.is_boolean()) return value.get<bool>() ? "yes" : "no";
    if (value.is_array()) {
        bool scalars = std::all_of(value.begin(), value.end(),
                                   [](const auto& item) { return item.is_primitive(); });
        if (!join_arrays || !scalars) return std::to_string(value.size());
        std::string joined;
        for (const auto& item : value) joined += (joined.empty() ? "" : ",") + cell_text(item);
        return joined.empty() ? "-" : joined;
    }
    return value.dump();
}

std::string field_text(const nlohmann::json& object, std::initializer_list<const char*> keys,
                       bool join_arrays) {
    if (!object.is_object()) return "-";
    for (const char* key : keys) {
        auto it = object.find(key);
        if (it != object.end()) return cell_text(*it, join_arrays);
    }
    return "-";
}

nlohmann::json list_in(const nlohmann::json& body, const char* key) {
    if (body.is_array()) return body;
    if (body.is_object()) {
        auto it = body.find(key);
        if (it != body.end() && it->is_array()) return *it;
    }
    return nlohmann::json::array();
}

void print_fields(std::ostream& out, const nlohmann::json& object, const std::string& prefix) {
    if (!object.is_object()) {
        out << (prefix.empty() ? "" : prefix + ": ") << cell_text(object) << "\n";
        return;
    }
    for (const auto& [key, value] : object.items()) {
        std::string name = prefix.empty() ? key : prefix + "." + key;
        if (value.is_object() && !value.empty()) {
            print_fields(out, value, name);
        } else if (value.is_array() && !value.empty() && !value.front().is_primitive()) {
            out << name << ": " << value.size() << "\n";
            for (size_t i = 0; i < value.size(); ++i)
                print_fields(out, value[i], name + "[" + std::to_string(i) + "]");
        } else {
            out << name << ": " << cell_text(value, /*join_arrays=*/true) << "\n";
        }
    }
}

void print_json(std::ostream& out, const nlohmann::json& body) {
    out << body.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace corral::cli
