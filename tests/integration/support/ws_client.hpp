#pragma once
// A WebSocket client of corrald's terminal endpoint for tests (Beast over the daemon's Unix
// socket). Every read has a generous bound that only catches hangs.

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace corral::testing {

/// One attached terminal socket.
class TerminalSocket {
  public:
    struct Frame {
        bool text = false;
        std::string data;
    };

    /// Connects and upgrades; throws (beast::system_error) when the daemon refuses.
    TerminalSocket(const std::string& socket_path, const std::string& target) : ws_(io_) {
        ws_.next_layer().connect(boost::asio::local::stream_protocol::endpoint(socket_path));
        ws_.handshake("localhost", target);
    }
    ~TerminalSocket() {
        boost::beast::error_code ignored;
        ws_.next_layer().close(ignored);
    }

    void type(const std::string& bytes) {
        ws_.binary(true);
        ws_.write(boost::asio::buffer(bytes));
    }
    void control(const std::string& text) {
        ws_.text(true);
        ws_.write(boost::asio::buffer(text));
    }

    /// The next frame; nullopt when the socket closed or nothing came within `bound`.
    std::optional<Frame> next(std::chrono::seconds bound = std::chrono::seconds(60)) {
        if (closed_) return std::nullopt;
        boost::beast::flat_buffer buffer;
        bool done = false;
        boost::beast::error_code ec;
        ws_.async_read(buffer, [&](boost::beast::error_code e, size_t) {
            ec = e;
            done = true;
        });
        io_.restart();
        io_.run_for(bound);
        if (!done) {
            closed_ = true;
            ws_.next_layer().cancel();
            io_.restart();
            io_.run();
            return std::nullopt;
        }
        if (ec) {
            closed_ = true;
            close_reason_ = ws_.reason().reason.c_str();
            return std::nullopt;
        }
        Frame frame{ws_.got_text(), boost::beast::buffers_to_string(buffer.data())};
        if (frame.text) texts.push_back(frame.data);
        else output += frame.data;
        return frame;
    }

    /// Reads until the terminal output holds `needle` (after `from`); false on close or hang.
    bool read_until(const std::string& needle, size_t from = 0) {
        while (output.find(needle, from) == std::string::npos)
            if (!next()) return false;
        return true;
    }
    /// Reads until a text frame of `type` arrives; returns it (null on close or hang).
    nlohmann::json read_control(const std::string& type) {
        for (size_t seen = texts.size();; ++seen) {
            while (texts.size() <= seen)
                if (!next()) return nullptr;
            auto json = nlohmann::json::parse(texts[seen], nullptr, false);
            if (json.is_object() && json.value("type", "") == type) return json;
        }
    }
    bool closed() const { return closed_; }

    std::string output;              ///< every binary byte received
    std::vector<std::string> texts;  ///< every text frame received

  private:
    boost::asio::io_context io_;
    boost::beast::websocket::stream<boost::asio::local::stream_protocol::socket> ws_;
    bool closed_ = false;
    std::string close_reason_;
};

}  // namespace corral::testing
