#include "client/report.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "client/report_spec.h"
#include "proto/status.h"

namespace attn::client {

absl::StatusCode StatusOf(const v1::CaseResult& r) { return CodeFromNumber(r.status()); }
bool IsOk(const v1::CaseResult& r) { return StatusOf(r) == absl::StatusCode::kOk; }
bool IsUnsupported(const v1::CaseResult& r) {
  return StatusOf(r) == absl::StatusCode::kFailedPrecondition;
}

Tally Count(const std::vector<CaseRecord>& cases) {
  Tally t;
  for (const auto& c : cases) {
    if (IsOk(c.result))
      ++t.ok;
    else if (IsUnsupported(c.result))
      ++t.unsupported;
    else
      ++t.failed;
  }
  return t;
}

namespace {

Json ServerFields(const v1::ServerInfo& server) {
  return Columns(server, ReportSpec().at("server_columns"));
}

// A case's columns, the tables' own included, and its requested backend's capabilities as the
// server's verdicts state them.
Json CaseFields(const CaseRecord& record, const Json& server) {
  Json f = Columns(record.result, ReportSpec().at("case_columns"), record.replica);
  f["takes_fp8_recipe"] = false;
  f["full_precision_peer"] = "";
  for (const Json& b : server.at("backends")) {
    if (b.at("name") == f.at("requested_backend")) {
      f["takes_fp8_recipe"] = b.at("takes_fp8_recipe");
      f["full_precision_peer"] = b.at("full_precision_peer");
    }
  }
  return f;
}

Json Summary(const Report& report) {
  const Tally t = Count(report.cases);
  return {{"cases", report.cases.size()},
          {"ok", t.ok},
          {"unsupported", t.unsupported},
          {"failed", t.failed}};
}

// Builds the spec's tables over a report's cases.
class Builder {
 public:
  explicit Builder(const Report& report) {
    report_["server"] = ServerFields(report.server);
    report_["summary"] = Summary(report);
    report_["wall_seconds"] = report.wall_seconds;
    report_["timing"] = "";
    for (const auto& c : report.cases) {
      fields_.push_back(CaseFields(c, report_["server"]));
      if (IsOk(c.result) && report_["timing"] == "") report_["timing"] = c.result.timing();
    }
  }

  const Json& report() const { return report_; }
  Scope CaseScope(size_t i, const Json& section) const {
    return Scope({&section, &report_}).With(fields_[i]);
  }

  std::vector<ReportTable> Tables() {
    const Json& spec = ReportSpec();
    std::vector<ReportTable> out;
    std::vector<size_t> all(fields_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    const Json none = Json::object();
    for (const Json& def : spec.at("before_sections")) Add(def, all, none, out);
    // Sections in the order they first appear.
    std::vector<std::pair<std::string, std::vector<size_t>>> sections;
    for (size_t i = 0; i < fields_.size(); ++i) {
      const std::string name = fields_[i].at("section");
      auto it = std::find_if(sections.begin(), sections.end(),
                             [&](const auto& s) { return s.first == name; });
      if (it == sections.end()) it = sections.insert(sections.end(), {name, {}});
      it->second.push_back(i);
    }
    for (const auto& [name, cases] : sections) {
      const Json section = {
          {"section_name", name.empty() ? spec.at("unnamed_section").get<std::string>() : name}};
      const Json* layout = nullptr;
      for (const Json& l : spec.at("layouts")) {
        if (Fits(l, cases, section)) {
          layout = &l;
          break;
        }
      }
      Add(layout->at("table"), cases, section, out);
      for (const Json& def : spec.at("after_section")) {
        const Json& layouts = def.at("layouts");
        if (std::find(layouts.begin(), layouts.end(), layout->at("name")) != layouts.end()) {
          Add(def, cases, section, out);
        }
      }
    }
    return out;
  }

  std::vector<ReportTable> Appendix() {
    std::vector<ReportTable> out;
    std::vector<size_t> all(fields_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    const Json none = Json::object();
    for (const Json& def : ReportSpec().at("appendix")) Add(def, all, none, out);
    return out;
  }

 private:
  // Whether a section's cases are laid out by `layout`: its axis varies, its fixed fields do not,
  // and every case holds its "all" condition.
  bool Fits(const Json& layout, const std::vector<size_t>& cases, const Json& section) const {
    auto distinct = [&](const std::string& field) {
      std::set<std::string> values;
      for (size_t i : cases) values.insert(fields_[i].at(field).dump());
      return values.size();
    };
    if (layout.contains("axis") && distinct(layout["axis"]) < 2) return false;
    for (const Json& f : layout.value("fixed", Json::array())) {
      if (distinct(f) > 1) return false;
    }
    for (size_t i : cases) {
      if (!CaseScope(i, section).Holds(layout.value("all", ""))) return false;
    }
    return true;
  }

  // The case of `cases` that `join` matches with case i (the last that does); null if none.
  Json Join(const Json& join, size_t i, const std::vector<size_t>& cases,
            const Json& section) const {
    Json found = nullptr;
    for (size_t j : cases) {
      if (!CaseScope(j, section).Holds(join.value("where", ""))) continue;
      bool match = true;
      for (const auto& [theirs, ours] : join.at("match").items()) {
        match = match && fields_[j].at(theirs) == fields_[i].at(ours.get<std::string>());
      }
      if (match) found = fields_[j];
    }
    return found;
  }

  // The table `def` over `cases` (of `section`), appended to `out` unless it has no rows.
  void Add(const Json& def, const std::vector<size_t>& cases, const Json& section,
           std::vector<ReportTable>& out) {
    std::vector<size_t> picked;
    std::set<std::string> seen;
    for (size_t i : cases) {
      const Scope s = CaseScope(i, section);
      if (!s.Holds(def.value("select", ""))) continue;
      if (def.contains("unique") &&
          !seen.insert(Format(s.Lookup(def["unique"].get<std::string>()), "")).second)
        continue;
      picked.push_back(i);
    }
    if (picked.empty()) return;
    if (def.contains("rows")) {  // a table per case
      for (size_t i : picked) {
        if (def.value("once", false) && !shown_once_.insert(&def).second) return;
        const Json join = def.contains("join") ? Json{{def["join"].at("as").get<std::string>(),
                                                       Join(def["join"], i, cases, section)}}
                                               : Json::object();
        const Scope s = CaseScope(i, section).With(join);
        ReportTable t = Start(def, s);
        t.headers = def.at("headers").get<std::vector<std::string>>();
        t.right_aligned = def.value("right", std::vector<bool>());
        for (const Json& row : def.at("rows")) {
          if (!s.Holds(row.value("if", ""))) continue;
          std::vector<std::string> cells;
          for (const Json& cell : row.at("cells")) cells.push_back(s.Text(cell));
          t.rows.push_back(std::move(cells));
        }
        out.push_back(std::move(t));
      }
      return;
    }
    ReportTable t = Start(def, CaseScope(picked.front(), section));
    std::set<std::string> notes;
    auto note = [&](const Scope& s) {
      if (!def.contains("note")) return;
      const std::string line = s.Text(def["note"]);
      if (!line.empty() && notes.insert(line).second) t.notes.push_back(line);
    };
    if (def.contains("pivot")) {
      const Json& p = def["pivot"];
      std::vector<Json> points;
      std::vector<std::string> columns;
      std::map<std::pair<std::string, std::string>, size_t> cells;
      t.headers = {p.at("header")};
      for (size_t i : picked) {
        const Scope s = CaseScope(i, section);
        const Json x = fields_[i].at(p.at("rows").get<std::string>());
        const std::string column = s.Text(p.at("columns"));
        if (std::find(points.begin(), points.end(), x) == points.end()) points.push_back(x);
        if (std::find(columns.begin(), columns.end(), column) == columns.end()) {
          columns.push_back(column);
          t.headers.push_back(s.Text(p.at("column_header")));
        }
        cells[{column, x.dump()}] = i;
      }
      std::sort(points.begin(), points.end(),
                [](const Json& a, const Json& b) { return a.get<double>() < b.get<double>(); });
      t.right_aligned.assign(t.headers.size(), true);
      for (const Json& x : points) {
        std::vector<std::string> row = {Format(x, "")};
        for (const std::string& column : columns) {
          const auto it = cells.find({column, x.dump()});
          if (it == cells.end()) {
            row.emplace_back();
            continue;
          }
          const Scope s = CaseScope(it->second, section);
          row.push_back(s.Text(p.at("cell")));
          note(s);
        }
        t.rows.push_back(std::move(row));
      }
    } else {
      std::vector<const Json*> columns;
      for (const Json& c : def.at("columns")) {
        const bool shown =
            !c.contains("shown_if_any") || std::any_of(picked.begin(), picked.end(), [&](size_t i) {
              return CaseScope(i, section).Holds(c["shown_if_any"].get<std::string>());
            });
        if (!shown) continue;
        columns.push_back(&c);
        t.headers.push_back(c.at("header"));
        t.right_aligned.push_back(c.value("right", false));
      }
      for (size_t i : picked) {
        const Scope s = CaseScope(i, section);
        std::vector<std::string> row;
        for (const Json* c : columns) {
          row.push_back(s.Holds(c->value("when", "")) ? s.Text(c->at("cell")) : "");
        }
        t.rows.push_back(std::move(row));
        note(s);
      }
    }
    if (def.contains("chart")) Chart(def["chart"], picked, section, t);
    out.push_back(std::move(t));
  }

  static ReportTable Start(const Json& def, const Scope& s) {
    ReportTable t;
    t.key = s.Text(def.at("key"));
    t.title = s.Text(def.at("title"));
    return t;
  }

  // The chart `def` of table `t`, over the table's cases that its "select" keeps.
  void Chart(const Json& def, const std::vector<size_t>& picked, const Json& section,
             ReportTable& t) const {
    std::vector<size_t> cases;
    bool shown = !def.contains("shown_if_any");
    for (size_t i : picked) {
      const Scope s = CaseScope(i, section);
      shown = shown || s.Holds(def["shown_if_any"].get<std::string>());
      if (s.Holds(def.value("select", ""))) cases.push_back(i);
    }
    if (!shown || cases.empty()) return;
    const Json& value = ReportSpec().at("chart_value");
    const std::string field = value.at("field");
    const std::string title =
        def.contains("title") ? CaseScope(cases.front(), section).Text(def["title"]) : t.title;
    if (def.at("kind") == "lines") {
      LineChart chart;
      chart.title = title;
      chart.x_label = def.at("x_label");
      chart.y_label = value.at("label");
      std::vector<std::pair<std::string, std::map<double, double>>> lines;
      for (size_t i : cases) {
        const std::string label = CaseScope(i, section).Text(def.at("line"));
        auto it = std::find_if(lines.begin(), lines.end(),
                               [&](const auto& l) { return l.first == label; });
        if (it == lines.end()) it = lines.insert(lines.end(), {label, {}});
        it->second[fields_[i].at(def.at("x").get<std::string>()).get<double>()] =
            fields_[i].at(field).get<double>();
      }
      for (const auto& [label, points] : lines) {
        chart.series.push_back({label, {points.begin(), points.end()}});
      }
      t.lines = std::move(chart);
    } else {
      BarChart chart;
      chart.title = title;
      chart.unit = value.at("unit");
      for (size_t i : cases) {
        chart.bars.emplace_back(CaseScope(i, section).Text(def.at("label")),
                                fields_[i].at(field).get<double>());
      }
      t.bars = std::move(chart);
    }
  }

  Json report_ = Json::object();  // server, summary, wall_seconds, timing
  std::vector<Json> fields_;      // per case
  std::set<const Json*> shown_once_;
};

}  // namespace

std::string CaseLabel(const CaseRecord& record, const std::string& label) {
  const Json server = ServerFields(v1::ServerInfo());
  const Json fields = CaseFields(record, server);
  return Scope({&fields}).Text(ReportSpec().at("labels").at(label));
}

Json ReportDocument(const Report& report) {
  const Json& spec = ReportSpec();
  Json doc = Json::object();
  doc["schema"] = spec.at("schema");
  doc["command"] = report.command;
  doc["target"] = report.target;
  doc["created"] = report.created;
  doc["wall_seconds"] = report.wall_seconds;
  doc["server"] = Columns(report.server, spec.at("server_columns"), "", true);
  doc["options"] = Columns(report.options, spec.at("options_columns"), "", true);
  doc["summary"] = Summary(report);
  Json cases = Json::array();
  for (const auto& c : report.cases) {
    cases.push_back(Columns(c.result, spec.at("case_columns"), c.replica, true));
  }
  doc["cases"] = std::move(cases);
  return doc;
}

std::vector<std::string> CaseColumnNames() {
  std::vector<std::string> names;
  const Json columns = Columns(v1::CaseResult(), ReportSpec().at("case_columns"), "", true);
  for (const auto& [name, value] : columns.items()) names.push_back(name);
  return names;
}

std::vector<ReportTable> ReportTables(const Report& report) { return Builder(report).Tables(); }
std::vector<ReportTable> AppendixTables(const Report& report) { return Builder(report).Appendix(); }

std::string ServerLine(const Report& report) {
  const Builder b(report);
  return Scope({&b.report()}).Text(ReportSpec().at("lines").at("server"));
}

std::string SummaryLine(const Report& report) {
  const Builder b(report);
  return Scope({&b.report()}).Text(ReportSpec().at("lines").at("summary"));
}

std::string ServedByLine(const Report& report) {
  const Builder b(report);
  const Json none = Json::object();
  std::map<std::string, int> served;
  for (size_t i = 0; i < report.cases.size(); ++i) {
    if (report.cases[i].replica.empty()) continue;
    ++served[b.CaseScope(i, none).Text(ReportSpec().at("lines").at("served_by"))];
  }
  std::string out;
  for (const auto& [who, n] : served)
    absl::StrAppend(&out, out.empty() ? "served by:" : ";", " ", who, " ", n);
  return out;
}

}  // namespace attn::client
