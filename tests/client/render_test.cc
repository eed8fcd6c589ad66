// The report renderers against golden files: a fixed synthetic run covering every section kind
// (sequence and batch sweeps with an unsupported cell, MHA/GQA/MQA variants, a checked
// correctness list, FP8 beside bf16, a failed case). ATTN_UPDATE_GOLDEN=1 rewrites the files;
// review the diff before committing it.
#include "client/render.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "attn/inputs.h"
#include "client/report.h"
#include "client/report_spec.h"
#include "client/svg_chart.h"
#include "proto/status.h"

namespace attn::client {
namespace {

v1::Shape MakeShape(int64_t b, int64_t t, int64_t n, int64_t k, int64_t h) {
  v1::Shape s;
  s.set_batch(b);
  s.set_q_len(t);
  s.set_num_heads(n);
  s.set_num_kv_heads(k);
  s.set_head_dim(h);
  return s;
}

// One OK case whose median is `ms`; the other statistics follow from it so every column differs.
CaseRecord Ok(const std::string& section, const v1::Shape& shape, v1::DType dtype, bool causal,
              const std::string& backend, double ms, const std::string& replica) {
  CaseRecord rec;
  rec.replica = replica;
  v1::CaseResult& r = rec.result;
  v1::BenchmarkCase* c = r.mutable_case_();
  c->set_section(section);
  *c->mutable_shape() = shape;
  c->set_dtype(dtype);
  c->set_causal(causal);
  c->set_backend(backend);
  r.set_backend(backend == "auto" ? "cudnn" : backend);
  r.set_status(CodeNumber(absl::StatusCode::kOk));
  v1::LatencyStats* st = r.mutable_stats();
  st->set_count(50);
  st->set_min_ms(ms * 0.95);
  st->set_median_ms(ms);
  st->set_mean_ms(ms * 1.01);
  st->set_p10_ms(ms * 0.97);
  st->set_p90_ms(ms * 1.05);
  st->set_p99_ms(ms * 1.2);
  st->set_stddev_ms(ms * 0.02);
  const double flops = 4.0 * shape.batch() * shape.num_heads() * shape.q_len() * shape.q_len() *
                       shape.head_dim() * (causal ? 0.5 : 1.0);
  r.set_tflops(flops / (ms * 1e-3) / 1e12);
  r.set_gbps(123.5);
  r.set_workspace_bytes(4096);
  r.set_peak_arena_bytes(1 << 20);
  r.set_timing("cuda events");
  r.set_input_sets(1);
  r.set_max_abs_error(-1);
  r.set_rel_l2_error(-1);
  r.set_causal_first_diff(-1);
  r.set_causal_last_diff(-1);
  r.set_device(0);
  r.set_device_name("NVIDIA H200");
  r.set_hostname(replica == "ipv4:10.0.0.1:50051" ? "attn-0" : "attn-1");
  return rec;
}

CaseRecord NotOk(CaseRecord rec, absl::StatusCode status, const std::string& message) {
  rec.result.set_status(CodeNumber(status));
  rec.result.set_message(message);
  rec.result.set_backend(status == absl::StatusCode::kFailedPrecondition ? ""
                                                                         : rec.result.backend());
  rec.result.clear_stats();
  rec.result.set_tflops(0);
  rec.result.set_gbps(0);
  return rec;
}

Report Fixture() {
  const std::string a = "ipv4:10.0.0.1:50051", b = "ipv4:10.0.0.2:50051";
  Report rep;
  rep.command = "attn-client bench --suite codelab --out report";
  rep.target = "dns:///attn-headless:50051";
  rep.created = "2026-12-03T10:00:00Z";
  rep.wall_seconds = 12.5;
  rep.server.set_version("0.1.0");
  rep.server.set_hostname("attn-0");
  rep.server.set_cuda_runtime_version(13000);
  rep.server.set_cuda_driver_version(13000);
  rep.server.set_cudnn_version("9.19.0");
  v1::DeviceInfo* d = rep.server.add_devices();
  d->set_index(0);
  d->set_kind("cuda");
  d->set_name("NVIDIA H200");
  d->set_compute_capability(90);
  // The backends' capabilities, which the report asks instead of comparing names; a GPU server
  // lists every backend in the registry's order.
  for (const char* name : {"cudnn", "fused", "naive", "cpu", "reference", "cudnn_fp8"}) {
    v1::BackendVerdict* v = rep.server.add_backends();
    v->set_backend(name);
    v->set_takes_fp8_recipe(std::string(name) == "cudnn_fp8");
    v->set_full_precision_peer(std::string(name) == "cudnn_fp8" ? "cudnn" : "");
  }
  rep.options.set_warmup(10);
  rep.options.set_repeats(50);
  int i = 0;
  for (int64_t t : {64, 128, 256}) {
    const v1::Shape s = MakeShape(4, t, 8, 8, 64);
    rep.cases.push_back(
        Ok("sequence sweep", s, v1::FLOAT32, false, "naive", 0.01 * t, i++ % 2 ? b : a));
    CaseRecord c =
        Ok("sequence sweep", s, v1::BFLOAT16, false, "cudnn", 0.002 * t, i++ % 2 ? b : a);
    if (t == 256) c = NotOk(c, absl::StatusCode::kFailedPrecondition, "cudnn: needs a CUDA device");
    rep.cases.push_back(c);
  }
  for (int64_t batch : {1, 2, 4}) {
    rep.cases.push_back(Ok("batch sweep", MakeShape(batch, 256, 8, 8, 64), v1::BFLOAT16, false,
                           "cudnn", 0.03 * batch, i++ % 2 ? b : a));
  }
  for (int64_t k : {8, 2, 1}) {
    rep.cases.push_back(Ok("MHA/GQA/MQA", MakeShape(2, 64, 8, k, 64), v1::BFLOAT16, false, "auto",
                           0.01 + 0.001 * k, i++ % 2 ? b : a));
  }
  CaseRecord checked =
      Ok("correctness", MakeShape(4, 128, 8, 8, 64), v1::BFLOAT16, true, "cudnn", 0.0123, a);
  checked.result.set_max_abs_error(3.05e-3);
  checked.result.set_rel_l2_error(1.7e-3);
  checked.result.set_numerics("float32 naive on the device");
  checked.result.set_causal_first_diff(0.41);
  checked.result.set_causal_last_diff(0);
  rep.cases.push_back(checked);
  const v1::Shape fp8_shape = MakeShape(4, 2048, 8, 8, 64);
  rep.cases.push_back(Ok("FP8 vs bf16", fp8_shape, v1::BFLOAT16, true, "cudnn", 0.25, a));
  CaseRecord fp8 = Ok("FP8 vs bf16", fp8_shape, v1::BFLOAT16, true, "cudnn_fp8", 0.17, b);
  v1::Fp8Report* f = fp8.result.mutable_fp8();
  f->set_recipe("margin=0 fp8_format=HYBRID amax_history_len=1024 amax_compute_algo=max");
  for (auto* v : {f->mutable_scales_used(), f->mutable_amaxes_seen(), f->mutable_next_scales()}) {
    v->set_q(v == f->mutable_amaxes_seen() ? 4.5 : 99.5);
    v->set_k(v == f->mutable_amaxes_seen() ? 4.25 : 105.4);
    v->set_v(v == f->mutable_amaxes_seen() ? 4.75 : 94.3);
    v->set_s(v == f->mutable_amaxes_seen() ? 1 : 448);
    v->set_o(v == f->mutable_amaxes_seen() ? 2.5 : 179.2);
  }
  f->set_calls_recorded(61);
  f->set_quantize_ms(0.021);
  f->set_max_diff_vs_cudnn(3.9e-2);
  rep.cases.push_back(fp8);
  rep.cases.push_back(NotOk(Ok("FP8 vs bf16", fp8_shape, v1::FLOAT32, true, "naive", 1, a),
                            absl::StatusCode::kResourceExhausted,
                            "arena: 8589934592 bytes needed but the arena holds only 4294967296"));
  for (size_t n = 0; n < rep.cases.size(); ++n) {
    rep.cases[n].result.set_index(static_cast<int>(n));
    rep.cases[n].result.set_total(static_cast<int>(rep.cases.size()));
    rep.cases[n].result.set_seed(CaseSeed(0, static_cast<int64_t>(n)));
  }
  return rep;
}

// The source tree's golden/ folder, or $ATTN_CLIENT_GOLDEN_DIR (for a copied bundle).
std::string GoldenPath(const std::string& name) {
  const char* dir = std::getenv("ATTN_CLIENT_GOLDEN_DIR");
  return std::string(dir != nullptr ? dir : ATTN_CLIENT_GOLDEN_DIR) + "/" + name;
}

// Compares `actual` with the golden file line by line (the first differing line is the message),
// or rewrites it under ATTN_UPDATE_GOLDEN=1.
void ExpectGolden(const std::string& name, const std::string& actual) {
  const std::string path = GoldenPath(name);
  if (std::getenv("ATTN_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path << " is missing; run with ATTN_UPDATE_GOLDEN=1 to write it";
  std::stringstream expected;
  expected << in.rdbuf();
  if (expected.str() == actual) return;
  std::vector<std::string> e = absl::StrSplit(expected.str(), '\n'),
                           a = absl::StrSplit(actual, '\n');
  for (size_t i = 0; i < std::max(e.size(), a.size()); ++i) {
    const std::string el = i < e.size() ? e[i] : "<end>", al = i < a.size() ? a[i] : "<end>";
    if (el != al) {
      ADD_FAILURE() << name << " line " << i + 1 << ":\n  expected: " << el
                    << "\n  actual:   " << al;
      return;
    }
  }
}

TEST(Render, TablesMatchTheGoldenFile) { ExpectGolden("tables.txt", RenderTables(Fixture())); }
TEST(Render, CsvMatchesTheGoldenFile) { ExpectGolden("results.csv", RenderCsv(Fixture())); }
TEST(Render, JsonMatchesTheGoldenFile) { ExpectGolden("results.json", RenderJson(Fixture())); }

TEST(Render, TablesHaveTheCodelabsTitlesAndUnits) {
  const std::string t = RenderTables(Fixture());
  EXPECT_NE(t.find("Attention timing — B=4, T=128, N=8, H=64"), std::string::npos) << t;
  EXPECT_NE(t.find("Sequence-length sweep — B=4, N=8, H=64"), std::string::npos) << t;
  EXPECT_NE(t.find("Batch-size sweep — T=256, N=8, H=64"), std::string::npos) << t;
  EXPECT_NE(t.find("(ms)"), std::string::npos) << t;
  EXPECT_NE(t.find("MQA"), std::string::npos) << t;
  // The FP8 row the codelab prints, with the speed-up over the bf16 case beside it.
  EXPECT_NE(t.find("Max |cudnn bf16 - cudnn_fp8|  3.90e-02"), std::string::npos) << t;
  EXPECT_NE(t.find("FP8 speed-up over bf16        1.47x"), std::string::npos) << t;
}

TEST(Render, CsvHasOneRowPerCaseAndEveryRowTheHeadersWidth) {
  const Report rep = Fixture();
  const std::string csv = RenderCsv(rep);
  std::vector<std::string> lines = absl::StrSplit(csv, "\r\n", absl::SkipEmpty());
  ASSERT_EQ(lines.size(), rep.cases.size() + 1);
  // No field of the fixture holds a comma inside quotes except messages; count outside quotes.
  auto fields = [](const std::string& line) {
    int n = 1;
    bool quoted = false;
    for (char c : line) {
      if (c == '"')
        quoted = !quoted;
      else if (c == ',' && !quoted)
        ++n;
    }
    return n;
  };
  const int width = fields(lines[0]);
  for (const auto& l : lines) EXPECT_EQ(fields(l), width) << l;
  for (const char* column :
       {"median_ms", "p90_ms", "tflops", "backend", "status", "replica", "hostname"}) {
    EXPECT_NE(lines[0].find(column), std::string::npos) << column << " missing from " << lines[0];
  }
}

TEST(Render, JsonParsesAndEachCaseCarriesItsStatisticsAndReplica) {
  const Report rep = Fixture();
  google::protobuf::Struct doc;
  auto status = google::protobuf::util::JsonStringToMessage(RenderJson(rep), &doc);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(doc.fields().at("schema").string_value(), "attn.bench.v1");
  const auto& cases = doc.fields().at("cases").list_value().values();
  ASSERT_EQ(cases.size(), rep.cases.size());
  std::set<std::string> replicas;
  for (int i = 0; i < cases.size(); ++i) {
    const auto& f = cases[i].struct_value().fields();
    for (const char* key :
         {"status", "backend", "median_ms", "p10_ms", "p90_ms", "p99_ms", "min_ms", "mean_ms",
          "stddev_ms", "tflops", "replica", "hostname", "device_name"}) {
      EXPECT_TRUE(f.contains(key)) << "case " << i << " lacks " << key;
    }
    replicas.insert(f.at("replica").string_value());
    if (IsOk(rep.cases[i].result)) {
      EXPECT_DOUBLE_EQ(f.at("median_ms").number_value(), rep.cases[i].result.stats().median_ms());
    }
  }
  EXPECT_EQ(replicas.size(), 2u);
  EXPECT_EQ(doc.fields().at("summary").struct_value().fields().at("failed").number_value(), 1);
}

// A report with one case whose texts hold what CSV and JSON must quote: commas, quotes, line
// breaks, control characters and bytes that are not UTF-8.
Report Awkward() {
  Report rep = Fixture();
  rep.cases.resize(1);
  rep.cases[0] = NotOk(rep.cases[0], absl::StatusCode::kInternal,
                       "a, \"quoted\"\r\nsecond line\t\x01 and \xff\xfe not UTF-8");
  rep.cases[0].replica = "ipv4:\xc3(bad)";
  return rep;
}

TEST(Render, CsvQuotesPerRfc4180) {
  const std::string csv = RenderCsv(Awkward());
  // The quote doubled; the comma and the line break stay inside the quoted field.
  EXPECT_NE(csv.find("\"a, \"\"quoted\"\"\r\nsecond line\t\x01 and \xff\xfe not UTF-8\""),
            std::string::npos)
      << csv;
  // Two records, each ended by CRLF: the header and the case (whose message spans two lines).
  EXPECT_EQ(csv.substr(csv.size() - 2), "\r\n");
  std::vector<std::string> records;
  bool quoted = false;
  size_t start = 0;
  for (size_t i = 0; i < csv.size(); ++i) {
    if (csv[i] == '"') quoted = !quoted;
    if (!quoted && csv.compare(i, 2, "\r\n") == 0) {
      records.push_back(csv.substr(start, i - start));
      start = i + 2;
    }
  }
  EXPECT_EQ(records.size(), 2u);
}

TEST(Render, JsonStaysValidOnInvalidUtf8) {
  const std::string json = RenderJson(Awkward());
  google::protobuf::Struct doc;
  auto status = google::protobuf::util::JsonStringToMessage(json, &doc);
  ASSERT_TRUE(status.ok()) << status << "\n" << json;
  const auto& c = doc.fields().at("cases").list_value().values(0).struct_value().fields();
  EXPECT_EQ(c.at("message").string_value(),
            "a, \"quoted\"\r\nsecond line\t\x01 and \uFFFD\uFFFD not UTF-8");
  EXPECT_EQ(c.at("replica").string_value(), "ipv4:\uFFFD(bad)");
  EXPECT_EQ(c.at("status").string_value(), "INTERNAL");
}

TEST(Render, HtmlIsSelfContainedAndHasEveryChart) {
  const std::string html = RenderHtml(Fixture());
  // (An SVG's xmlns names a namespace; nothing is fetched from it.)
  for (const char* external : {"<script", "<link", "src=", "href=\"http", "url(", "@import"}) {
    EXPECT_EQ(html.find(external), std::string::npos) << "external asset: " << external;
  }
  for (const char* part : {"MHA", "GQA", "MQA", "TransformerEngine delayed scaling",
                           "amax_history_len=1024", "Every case", "<svg", "</html>"}) {
    EXPECT_NE(html.find(part), std::string::npos) << part;
  }
  // The same tables as the terminal's, each under its title, and the charts the spec gives them:
  // the default shape's bars, a line chart per sweep, the variants' and FP8's bars.
  for (const ReportTable& t : ReportTables(Fixture())) {
    EXPECT_NE(html.find("<h2>" + HtmlEscape(t.title) + "</h2>"), std::string::npos) << t.title;
  }
  size_t charts = 0;
  for (size_t at = 0; (at = html.find("<svg", at)) != std::string::npos; ++at) ++charts;
  EXPECT_EQ(charts, 5u);
  // Axis titles with units on the sweep charts.
  EXPECT_NE(html.find("ms per call"), std::string::npos);
  EXPECT_NE(html.find("Sequence length T"), std::string::npos);
  EXPECT_NE(html.find("Batch size B"), std::string::npos);
  // Text from the server is escaped, not injected.
  Report rep = Fixture();
  rep.server.set_cpu_fallback(true);
  rep.server.set_note("<script>alert(1)</script>");
  const std::string escaped = RenderHtml(rep);
  EXPECT_EQ(escaped.find("<script>alert"), std::string::npos);
  EXPECT_NE(escaped.find("&lt;script&gt;"), std::string::npos);
}

// A sweep run with --check: its numerics reach the terminal in a table right under the sweep,
// as a list section's do in its own columns.
TEST(Render, ACheckedSweepShowsItsNumericsUnderItsTable) {
  Report rep = Fixture();
  for (CaseRecord& c : rep.cases) {
    if (c.result.case_().section() != "sequence sweep" || !IsOk(c.result)) continue;
    c.result.set_max_abs_error(1.5e-3);
    c.result.set_rel_l2_error(2e-4);
    c.result.set_numerics("vs float64 reference on the host");
  }
  const std::vector<ReportTable> tables = ReportTables(rep);
  std::vector<std::string> keys;
  for (const ReportTable& t : tables) keys.push_back(t.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"timing", "sequence sweep", "sequence sweep numerics",
                                            "batch sweep", "MHA/GQA/MQA", "correctness",
                                            "causal effect", "FP8 vs bf16", "fp8"}));
  const ReportTable& numerics = tables[2];
  EXPECT_EQ(numerics.title, "Numerics against the reference — sequence sweep");
  EXPECT_EQ(numerics.headers, (std::vector<std::string>{"Backend", "Problem", "Max |err|",
                                                        "Rel L2 err", "Reference"}));
  ASSERT_EQ(numerics.rows.size(), 5u);  // the unsupported case has no numerics
  EXPECT_EQ(numerics.rows[0],
            (std::vector<std::string>{"naive float32", "B4 T64 S64 N8 K8 H64", "1.50e-03",
                                      "2.00e-04", "vs float64 reference on the host"}));
  EXPECT_NE(RenderTables(rep).find(numerics.Render()), std::string::npos);
  // Without --check (the golden run) there is no such table.
  for (const ReportTable& t : ReportTables(Fixture())) EXPECT_NE(t.key, "sequence sweep numerics");
}

// Cases sent without a section (attn_client's default) make one table, "Cases", found by "cases".
TEST(Render, CasesWithoutASectionAreTheCasesTable) {
  Report rep = Fixture();
  rep.cases.resize(1);
  rep.cases[0].result.mutable_case_()->clear_section();
  rep.cases[0].result.mutable_case_()->mutable_shape()->set_q_len(32);
  const std::vector<ReportTable> tables = ReportTables(rep);
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(tables[0].key, "cases");
  EXPECT_EQ(tables[0].title, "Cases");
  EXPECT_EQ(tables[0].rows[0][1], "B4 T32 S32 N8 K8 H64");
}

// Every placeholder and condition of the spec names a field a case or the report has, and every
// format it names is defined: a typo would otherwise print an empty cell.
TEST(ReportSpec, EveryFieldAndFormatItNamesExists) {
  const Json& spec = ReportSpec();
  std::set<std::string> fields = {
      "server", "summary",      "wall_seconds",     "timing",
      "peer",   "section_name", "takes_fp8_recipe", "full_precision_peer"};
  for (const Json& column : spec.at("case_columns")) {
    for (const Json& c : column.contains("present") ? column["columns"] : Json::array({column})) {
      fields.insert(c.at("name").get<std::string>());
    }
  }
  for (const auto& [label, text] : spec.at("labels").items()) fields.insert(label);
  std::set<std::string> formats = {"", "kv_lens", "names", "capitalized"};
  for (const auto& [name, format] : spec.at("formats").items()) formats.insert(name);
  auto known = [&](const std::string& path) {
    for (absl::string_view part : absl::StrSplit(path, '/')) {
      const std::string head(part.substr(0, part.find('.')));
      if (!fields.count(head)) return false;
    }
    return true;
  };
  const std::regex placeholder("\\{([^{}:]*):?([^{}]*)\\}");
  int checked = 0;
  std::function<void(const Json&, const std::string&)> walk = [&](const Json& v,
                                                                  const std::string& key) {
    if (v.is_structured()) {
      for (auto it = v.begin(); it != v.end(); ++it) walk(*it, v.is_object() ? it.key() : key);
      return;
    }
    if (!v.is_string() || key == "about") return;
    const std::string text = v.get<std::string>();
    if (key == "if" || key == "select" || key == "when" || key == "all" || key == "shown_if_any" ||
        key == "where") {
      const std::string clauses = absl::StrReplaceAll(text, {{" and ", "&"}, {" or ", "|"}});
      for (absl::string_view clause : absl::StrSplit(clauses, absl::ByAnyChar("&|"))) {
        std::vector<std::string> words = absl::StrSplit(clause, ' ', absl::SkipEmpty());
        for (size_t i : {size_t{0}, size_t{2}}) {
          if (i >= words.size()) continue;
          std::string w = words[i];
          if (!w.empty() && w[0] == '!') w.erase(0, 1);
          double number;
          if (w.empty() || w[0] == '\'' || w == "true" || w == "false" || w == "null" ||
              absl::SimpleAtod(w, &number))
            continue;
          EXPECT_TRUE(known(w)) << "condition '" << text << "' names " << w;
          ++checked;
        }
      }
      return;
    }
    for (std::sregex_iterator it(text.begin(), text.end(), placeholder), end; it != end; ++it) {
      EXPECT_TRUE(known((*it)[1])) << "'" << text << "' names " << (*it)[1];
      EXPECT_TRUE(formats.count((*it)[2])) << "'" << text << "' formats with " << (*it)[2];
      ++checked;
    }
  };
  walk(spec, "");
  EXPECT_GT(checked, 100);
}

// attn/records.h's rules, which attn-bench's CSV and JSON follow too.
TEST(Records, NumbersCsvAndJsonFollowOneSetOfRules) {
  const Json record = {{"name", "a \"b\", c"},
                       {"ms", 0.123456789},
                       {"whole", 2.0},
                       {"none", std::nan("")},
                       {"list", {1.0000001, 3.5}}};
  EXPECT_EQ(RecordsJson(record),
            R"({"name":"a \"b\", c","ms":0.123457,"whole":2,"none":null,"list":[1,3.5]})");
  EXPECT_EQ(RecordsCsv({"name", "ms", "none", "missing"}, {record}),
            "name,ms,none,missing\r\n\"a \"\"b\"\", c\",0.123457,,\r\n");
}

}  // namespace
}  // namespace attn::client
