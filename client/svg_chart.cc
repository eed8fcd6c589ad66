#include "client/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace attn::client {
namespace {

constexpr double kWidth = 760, kPlotLeft = 80, kPlotRight = 740, kPlotTop = 48, kPlotBottom = 330;

std::string Tick(double v) {
  if (v >= 1000 && std::fmod(v, 1) == 0) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.3g", v);
}

// Ticks at 1, 2, 5 x 10^k: the linear axis's step for about five intervals up to `max`.
double NiceStep(double max) {
  const double raw = max / 5;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

}  // namespace

const char* SeriesColor(const std::string& label) {
  static const char* kColors[] = {"#0969da", "#d1242f", "#1a7f37", "#8250df",
                                  "#bf8700", "#1b7c83", "#e16f24", "#57606a"};
  static std::mutex mu;
  static std::map<std::string, size_t> seen;
  std::lock_guard<std::mutex> lock(mu);
  const size_t i = seen.emplace(label, seen.size()).first->second;
  return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string LineChart::Render() const {
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  std::vector<double> xs;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
      if (std::find(xs.begin(), xs.end(), x) == xs.end()) xs.push_back(x);
    }
  }
  const double legend_rows = static_cast<double>((series.size() + 2) / 3);
  const double height = kPlotBottom + 60 + 22 * legend_rows;
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" "
      "height=\"%.0f\" role=\"img\" aria-label=\"%s\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n"
      "<text x=\"%.0f\" y=\"24\" font-size=\"15\" font-weight=\"bold\" "
      "text-anchor=\"middle\">%s</text>\n",
      kWidth, height, kWidth, height, HtmlEscape(title), kWidth / 2, HtmlEscape(title));
  if (xs.empty()) {
    return out +
           "<text x=\"380\" y=\"180\" text-anchor=\"middle\">no successful cases to "
           "plot</text></svg>\n";
  }
  std::sort(xs.begin(), xs.end());
  const bool log_y = y_min > 0 && y_max / y_min > 30;
  auto fx = [&](double x) {
    if (x_max == x_min) return (kPlotLeft + kPlotRight) / 2;
    const double t = log2_x
                         ? (std::log2(x) - std::log2(x_min)) / (std::log2(x_max) - std::log2(x_min))
                         : (x - x_min) / (x_max - x_min);
    return kPlotLeft + 20 + t * (kPlotRight - kPlotLeft - 40);
  };
  double lo = 0, hi = 0;
  std::vector<double> y_ticks;
  if (log_y) {
    lo = std::pow(10, std::floor(std::log10(y_min)));
    hi = std::pow(10, std::ceil(std::log10(y_max)));
    for (double d = lo; d <= hi * 1.0001; d *= 10) {
      for (double m : {1.0, 2.0, 5.0}) {
        if (d * m <= hi * 1.0001) y_ticks.push_back(d * m);
      }
    }
  } else {
    const double step = NiceStep(y_max);
    hi = std::ceil(y_max / step) * step;
    for (double v = 0; v <= hi * 1.0001; v += step) y_ticks.push_back(v);
  }
  auto fy = [&](double y) {
    const double t =
        log_y ? (std::log10(y) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : y / hi;
    return kPlotBottom - t * (kPlotBottom - kPlotTop);
  };
  // Grid, ticks and axis labels.
  for (double v : y_ticks) {
    absl::StrAppendFormat(
        &out,
        "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#d0d7de\" "
        "stroke-width=\"0.6\"/><text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" "
        "dominant-baseline=\"middle\">%s</text>\n",
        kPlotLeft, kPlotRight, fy(v), fy(v), kPlotLeft - 6, fy(v), Tick(v));
  }
  for (double x : xs) {
    absl::StrAppendFormat(
        &out,
        "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"#57606a\"/>"
        "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n",
        fx(x), fx(x), kPlotBottom, kPlotBottom + 5, fx(x), kPlotBottom + 19, Tick(x));
  }
  absl::StrAppendFormat(
      &out,
      "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
      "stroke=\"#57606a\"/>\n"
      "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n"
      "<text transform=\"translate(18 %.0f) rotate(-90)\" text-anchor=\"middle\">%s%s</text>\n",
      kPlotLeft, kPlotTop, kPlotRight - kPlotLeft, kPlotBottom - kPlotTop,
      (kPlotLeft + kPlotRight) / 2, kPlotBottom + 38, HtmlEscape(x_label),
      (kPlotTop + kPlotBottom) / 2, HtmlEscape(y_label), log_y ? " — log scale" : "");
  // Lines with markers; each marker's <title> is its exact value.
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = SeriesColor(series[i].label);
    std::string pts;
    for (const auto& [x, y] : series[i].points)
      absl::StrAppendFormat(&pts, "%.1f,%.1f ", fx(x), fy(y));
    absl::StrAppendFormat(
        &out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", color,
        pts);
    for (const auto& [x, y] : series[i].points) {
      absl::StrAppendFormat(&out,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>%s: %s, "
                            "%s ms</title></circle>\n",
                            fx(x), fy(y), color, HtmlEscape(series[i].label), Tick(x), Tick(y));
    }
  }
  // Legend below the plot, three entries per row.
  for (size_t i = 0; i < series.size(); ++i) {
    const double lx = kPlotLeft + static_cast<double>(i % 3) * 220;
    const double ly = kPlotBottom + 60 + 22 * static_cast<double>(i / 3);
    absl::StrAppendFormat(&out,
                          "<rect x=\"%.0f\" y=\"%.0f\" width=\"18\" height=\"4\" fill=\"%s\"/>"
                          "<text x=\"%.0f\" y=\"%.0f\" dominant-baseline=\"middle\">%s</text>\n",
                          lx, ly - 2, SeriesColor(series[i].label), lx + 24, ly,
                          HtmlEscape(series[i].label));
  }
  return out + "</svg>\n";
}

std::string BarChart::Render() const {
  double max = 0;
  for (const auto& [label, v] : bars) max = std::max(max, v);
  const double row = 30, top = 40, label_w = 220, bar_max = 400;
  const double height = top + row * static_cast<double>(bars.size()) + 34;
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" "
      "height=\"%.0f\" role=\"img\" aria-label=\"%s\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n"
      "<text x=\"%.0f\" y=\"22\" font-size=\"15\" font-weight=\"bold\" "
      "text-anchor=\"middle\">%s</text>\n",
      kWidth, height, kWidth, height, HtmlEscape(title), kWidth / 2, HtmlEscape(title));
  for (size_t i = 0; i < bars.size(); ++i) {
    const auto& [label, v] = bars[i];
    const double y = top + row * static_cast<double>(i);
    const double w = max > 0 ? std::max(1.0, v / max * bar_max) : 1.0;
    absl::StrAppendFormat(
        &out,
        "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\" dominant-baseline=\"middle\">%s</text>"
        "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"20\" fill=\"%s\"><title>%s: %s "
        "%s</title></rect>"
        "<text x=\"%.1f\" y=\"%.1f\" dominant-baseline=\"middle\">%s %s</text>\n",
        label_w - 8, y + 10, HtmlEscape(label), label_w, y, w, SeriesColor(label),
        HtmlEscape(label), Tick(v), HtmlEscape(unit), label_w + w + 6, y + 10, Tick(v),
        HtmlEscape(unit));
  }
  absl::StrAppendFormat(
      &out, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#57606a\">%s is better.</text>\n</svg>\n", label_w,
      height - 10, lower_is_better ? "Lower" : "Higher");
  return out;
}

}  // namespace attn::client
