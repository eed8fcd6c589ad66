// Inline SVG charts for the HTML report: a line chart (latency vs an axis, one line per series)
// and a horizontal bar chart, each with axes, units, a legend and text a reader can select.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace attn::client {

struct LineSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending; y > 0
};

struct LineChart {
  std::string title;
  std::string x_label;  // "Sequence length T (= S)"
  std::string y_label;  // "Median latency (ms per call)"
  bool log2_x = true;   // sweeps double their axis: equal spacing per doubling
  std::vector<LineSeries> series;
  // y is drawn on a log scale when the data spans more than 30x, else linear from 0.
  std::string Render() const;
};

struct BarChart {
  std::string title;
  std::string unit;  // "ms"
  bool lower_is_better = true;
  std::vector<std::pair<std::string, double>> bars;
  std::string Render() const;
};

// The colour of a series or bar: the palette in the order labels are first drawn in this
// process, so one backend keeps its colour across a report's charts.
const char* SeriesColor(const std::string& label);

// Escapes &, <, >, " and ' for HTML and SVG text and attributes.
std::string HtmlEscape(const std::string& s);

}  // namespace attn::client
