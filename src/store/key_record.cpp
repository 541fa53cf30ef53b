#include "store/key_record.hpp"

#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "core/path_kind.hpp"
#include "core/text.hpp"
#include "store/atomic_file.hpp"

namespace archbuild::store {

std::string utc_now_iso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

KeyRecord::KeyRecord(const Layout& layout, std::string key) : key_(std::move(key)), path_(layout.manifest(key_)) {}

bool KeyRecord::exists() const {
  std::error_code ec;
  return std::filesystem::is_regular_file(path_, ec);
}

Result<nlohmann::json> KeyRecord::read() const {
  // Read back from the cache, so checked as an input path is: what it is before it is opened (a
  // FIFO would block, a directory reads as nothing). A damaged record is the cache's damage, not
  // a failed stage: exit 1 (not fine) with the command that removes what is there.
  const std::string shown = text::quoted(path_.string(), 4096);
  auto is = paths::classify(path_);
  if (is.kind == paths::Kind::missing) return nlohmann::json::object();
  if (is.kind == paths::Kind::directory)
    return Error::not_fine(fmt::format("{}: is a directory, not archbuild's record of the key; remove it (rm -r -- {}) and "
                                       "run again: the key is then built again from its source",
                                       shown, shown));
  auto fd = paths::open_regular_file(path_, "key record");
  if (!fd)
    return Error::not_fine(fmt::format("{}; remove it (rm -- {}) and run again: the key is then built again from its "
                                       "source",
                                       fd.error().message, shown));
  std::string text;
  std::vector<char> buf(1 << 16);
  for (;;) {
    ssize_t n = ::read(*fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf.data(), static_cast<std::size_t>(n));
  }
  ::close(*fd);
  auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    // There is no `archbuild cache` command: the one that exists is rm. Without the manifest the
    // key is built again (its stamps are gone with it), which is what a damaged one needs.
    return Error::not_fine(fmt::format(
        "{}: not a valid archbuild manifest ({}); remove it (rm -- {}) and run again: the key is then built again "
        "from its source",
        shown, text.empty() ? "an empty file" : "not a JSON object", shown));
  return doc;
}

Result<Ok> KeyRecord::write(const nlohmann::json& doc) const {
  // A path or value that is not UTF-8 (a tree under such a name) is kept with U+FFFD for the
  // bytes JSON cannot carry, not an exception.
  std::string text = doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return writer_ ? writer_(path_, text) : write_file_atomic(path_, text);
}

Result<Ok> KeyRecord::update(const std::function<void(nlohmann::json&)>& edit) const {
  auto doc = read();
  if (!doc) return doc.error();
  (*doc)["key"] = key_;
  edit(*doc);
  return write(*doc);
}

Result<bool> KeyRecord::done(std::string_view stage) const {
  auto doc = read();
  if (!doc) return doc.error();
  auto stages = doc->find("stages");
  if (stages == doc->end() || !stages->is_object()) return false;
  auto s = stages->find(std::string(stage));
  return s != stages->end() && s->is_object() && s->value("done", false);
}

Result<Ok> KeyRecord::mark_done(std::string_view stage, const nlohmann::json& extra) const {
  if (!Layout::valid_name(stage)) return Error::bad_input(fmt::format("invalid stage name '{}'", stage));
  return update([&](nlohmann::json& doc) {
    if (!doc.contains("stages") || !doc["stages"].is_object()) doc["stages"] = nlohmann::json::object();
    nlohmann::json s = extra.is_object() ? extra : nlohmann::json::object();
    s["done"] = true;
    s["at"] = utc_now_iso();
    doc["stages"][std::string(stage)] = s;
  });
}

Result<Ok> KeyRecord::clear_stage(std::string_view stage) const {
  return update([&](nlohmann::json& doc) {
    if (doc.contains("stages") && doc["stages"].is_object()) doc["stages"].erase(std::string(stage));
  });
}

Result<Ok> KeyRecord::clear_stages() const {
  return update([&](nlohmann::json& doc) { doc["stages"] = nlohmann::json::object(); });
}

Result<std::optional<std::string>> KeyRecord::resume_point(const std::vector<std::string>& order) const {
  for (const auto& stage : order) {
    auto d = done(stage);
    if (!d) return d.error();
    if (!*d) return std::optional<std::string>(stage);
  }
  return std::optional<std::string>();
}

Result<Ok> KeyRecord::set_wheel(const StoredWheel& stored, const std::string& filename) const {
  return update([&](nlohmann::json& doc) {
    doc["wheel"] = {{"sha256", stored.sha256}, {"filename", filename}, {"size", stored.size}};
  });
}

Result<std::optional<WheelRef>> KeyRecord::wheel() const {
  auto doc = read();
  if (!doc) return doc.error();
  auto w = doc->find("wheel");
  if (w == doc->end() || !w->is_object()) return std::optional<WheelRef>();
  // A field of another type is a damaged entry (wheel_damage() says so), not an exception.
  auto text_of = [&](const char* field) {
    auto f = w->find(field);
    return f != w->end() && f->is_string() ? f->get<std::string>() : std::string();
  };
  WheelRef r;
  r.sha256 = text_of("sha256");
  r.filename = text_of("filename");
  auto size = w->find("size");
  r.size = size != w->end() && size->is_number_unsigned() ? size->get<std::uintmax_t>() : 0;
  bool hex = r.sha256.size() == 64 && r.sha256.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!hex || r.filename.empty()) return std::optional<WheelRef>();
  return std::optional<WheelRef>(r);
}

std::optional<std::string> KeyRecord::wheel_damage() const {
  auto doc = read();
  if (!doc) return std::nullopt;
  auto w = doc->find("wheel");
  if (w == doc->end()) return std::nullopt;
  if (!w->is_object()) return fmt::format("its \"wheel\" entry is a {}, not an object", w->type_name());
  auto sha_field = w->find("sha256");
  auto sha = sha_field != w->end() && sha_field->is_string() ? sha_field->get<std::string>() : std::string();
  bool hex = sha.size() == 64 && sha.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!hex) return std::string("its wheel's \"sha256\" is not 64 lowercase hex digits");
  auto name = w->value("filename", nlohmann::json());
  if (!name.is_string() || name.get<std::string>().empty()) return std::string("its wheel has no \"filename\"");
  return std::nullopt;
}

Result<Ok> KeyRecord::clear_wheel() const {
  return update([](nlohmann::json& doc) { doc.erase("wheel"); });
}

}  // namespace archbuild::store
