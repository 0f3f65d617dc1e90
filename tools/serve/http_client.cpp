// The load generator's HTTP client (see http_client.h).
#include "tools/serve/http_client.h"

#include <httplib.h>

#include <chrono>

#include "models/error.h"

namespace g4c::serve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string content_of(const json& choice) {
  if (choice.contains("text") && choice["text"].is_string()) return choice["text"];
  for (const char* k : {"delta", "message"})
    if (choice.contains(k) && choice[k].is_object() && choice[k].contains("content") && choice[k]["content"].is_string())
      return choice[k]["content"];
  return "";
}

}  // namespace

void split_url(const std::string& url, std::string* host, int* port) {
  const std::string p = "http://";
  if (url.rfind(p, 0) != 0) throw Error("--url " + url + ": expected http://HOST:PORT");
  std::string rest = url.substr(p.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) {
    *host = rest;
    *port = 80;
    return;
  }
  *host = rest.substr(0, colon);
  try {
    *port = std::stoi(rest.substr(colon + 1));
  } catch (const std::exception&) {
    throw Error("--url " + url + ": the port is not a number");
  }
}

ClientResult post_openai(const std::string& host, int port, const std::string& path, const json& body,
                         double timeout_s) {
  ClientResult out;
  const bool stream = body.value("stream", false);
  httplib::Client cli(host, port);
  const auto t = std::chrono::duration<double>(timeout_s);
  cli.set_read_timeout(std::chrono::duration_cast<std::chrono::microseconds>(t));
  cli.set_write_timeout(std::chrono::duration_cast<std::chrono::microseconds>(t));
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string raw, pending;
  const auto start = Clock::now();
  double last = -1;
  auto on_event = [&](const std::string& data) {
    if (data == "[DONE]") return;
    json j = json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return;
    if (j.contains("usage") && j["usage"].is_object()) {
      out.prompt_tokens = j["usage"].value("prompt_tokens", 0);
      out.completion_tokens = j["usage"].value("completion_tokens", 0);
    }
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
    const json& c = j["choices"][0];
    const std::string text = content_of(c);
    if (!text.empty()) {
      const double now = std::chrono::duration<double>(Clock::now() - start).count();
      if (last < 0) out.ttft_s = now;
      else out.itl_s.push_back(now - last);
      last = now;
      out.text += text;
    }
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) out.finish_reason = c["finish_reason"];
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (!stream) {
      raw.append(data, n);
      return true;
    }
    pending.append(data, n);
    for (size_t e; (e = pending.find("\n\n")) != std::string::npos;) {
      const std::string event = pending.substr(0, e);
      pending.erase(0, e + 2);
      if (event.rfind("data: ", 0) == 0) on_event(event.substr(6));
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool ok = cli.send(req, res, err);
  out.e2e_s = std::chrono::duration<double>(Clock::now() - start).count();
  if (!ok) {
    out.error = "connection failed: " + httplib::to_string(err);
    return out;
  }
  out.status = res.status;
  if (!stream || res.status != 200) {
    if (raw.empty()) raw = res.body;
    json j = json::parse(raw, nullptr, false);
    if (res.status != 200 || j.is_discarded() || !j.is_object() || j.contains("error")) {
      out.error = raw;
      if (out.status == 200) out.status = 500;
      return out;
    }
    if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
      out.text = content_of(j["choices"][0]);
      out.finish_reason = j["choices"][0].value("finish_reason", "");
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      out.prompt_tokens = j["usage"].value("prompt_tokens", 0);
      out.completion_tokens = j["usage"].value("completion_tokens", 0);
    }
    out.ttft_s = out.e2e_s;
  }
  return out;
}

}  // namespace g4c::serve
