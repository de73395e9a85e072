// DOT to SVG, PNG or PDF with Graphviz's libraries, in-process.
#include <gvc.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "snapdiff/report/chart.hpp"
#include "snapdiff/error.hpp"

namespace snapdiff {

namespace {

// Graphviz reports through agerr(); collect the messages instead of letting
// it print (the library never prints). Warnings are dropped, errors thrown
// (RenderError).
std::string g_messages;
int collect(char* msg) {
  if (g_messages.size() < 4096) g_messages += msg;
  return 0;
}

// What Graphviz reported, on one line: its messages end in newlines and
// some span several lines.
std::string reported() {
  std::string out;
  for (char c : g_messages) {
    const bool space = c == '\n' || c == '\r' || c == '\t' || c == ' ';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

struct GraphvizContext {
  GVC_t* gvc = nullptr;
  GraphvizContext() {
    agseterrf(collect);
    agseterr(AGERR);  // only errors are kept
    gvc = gvContext();
  }
  ~GraphvizContext() {
    if (gvc) gvFreeContext(gvc);
  }
};

GraphvizContext& context() {
  static GraphvizContext c;
  return c;
}

// Graphviz names every element in a <title> (our node names: n12, l3a, bg,
// the graph "snapdiff"), which browsers show on hover, and puts a node's
// tooltip on an <a xlink:title> around it. Make the tooltip the <title> and
// drop the names.
bool generated_name(std::string_view s) {
  if (s == "snapdiff" || s == "bg") return true;
  if (s.empty() || (s[0] != 'n' && s[0] != 'l')) return false;
  // n12, l3a, l3b, l3a&#45;&gt;l3b
  for (char c : s)
    if (!((c >= '0' && c <= '9') || c == 'n' || c == 'l' || c == 'a' || c == 'b' || c == '&' || c == '#' || c == ';' ||
          c == 'g' || c == 't' || c == '4' || c == '5'))
      return false;
  return true;
}

std::string tidy_svg(const std::string& svg) {
  std::string out;
  out.reserve(svg.size());
  size_t pos = 0;
  while (true) {
    const size_t t = svg.find("<title>", pos);
    if (t == std::string::npos) break;
    const size_t te = svg.find("</title>", t);
    if (te == std::string::npos) break;
    out.append(svg, pos, t - pos);
    const std::string name = svg.substr(t + 7, te - t - 7);
    size_t after = te + 8;
    // <title>n5</title>\n<g id="a_..."><a xlink:title="TIP">
    const size_t g = svg.find_first_not_of("\n ", after);
    std::string tip;
    size_t a_open = std::string::npos, a_end = std::string::npos;
    if (g != std::string::npos && svg.compare(g, 9, "<g id=\"a_") == 0) {
      const size_t gclose = svg.find('>', g);
      const std::string key = "<a xlink:title=\"";
      if (gclose != std::string::npos && svg.compare(gclose + 1, key.size(), key) == 0) {
        a_open = gclose + 1;
        const size_t q = svg.find('"', a_open + key.size());
        a_end = svg.find('>', q);
        if (q != std::string::npos && a_end != std::string::npos) tip = svg.substr(a_open + key.size(), q - a_open - key.size());
        else a_open = std::string::npos;
      }
    }
    if (a_open != std::string::npos) {
      out += "<title>" + tip + "</title>";
      out.append(svg, after, a_open - after);
      const size_t close = svg.find("</a>", a_end);
      if (close == std::string::npos) {
        pos = a_end + 1;
        continue;
      }
      out.append(svg, a_end + 1, close - a_end - 1);
      pos = close + 4;
      continue;
    }
    if (!generated_name(name)) out.append(svg, t, after - t);
    // Skip the newline after a dropped title.
    if (generated_name(name) && after < svg.size() && svg[after] == '\n') ++after;
    pos = after;
  }
  out.append(svg, pos, std::string::npos);
  return out;
}

}  // namespace

std::string render_chart(const std::string& dot, ChartFormat f) {
  if (f == ChartFormat::Dot) return dot;
  GraphvizContext& ctx = context();
  if (!ctx.gvc) throw RenderError("Graphviz: cannot create a context");
  g_messages.clear();
  Agraph_t* g = agmemread(dot.c_str());
  if (!g) throw RenderError("Graphviz: cannot parse the chart's DOT: " + reported());
  struct Closer {
    Agraph_t* g;
    GVC_t* gvc;
    bool laid_out = false;
    ~Closer() {
      if (laid_out) gvFreeLayout(gvc, g);
      agclose(g);
    }
  } closer{g, ctx.gvc};
  // Bitmaps at 96 dpi (the drawing is in points, 72 to the inch); SVG and
  // PDF stay in points.
  if (f == ChartFormat::Png) agsafeset(g, const_cast<char*>("dpi"), const_cast<char*>("96"), const_cast<char*>(""));
  if (gvLayout(ctx.gvc, g, "nop2") != 0) throw RenderError("Graphviz: layout failed: " + reported());
  closer.laid_out = true;
  const char* fmt = f == ChartFormat::Svg ? "svg" : f == ChartFormat::Png ? "png:cairo" : "pdf:cairo";
  char* data = nullptr;
  unsigned int len = 0;
  if (gvRenderData(ctx.gvc, g, fmt, &data, &len) != 0 || !data)
    throw RenderError(std::string("Graphviz: cannot render ") + fmt + " (is the cairo plugin installed?) " +
                      reported());
  std::string out(data, len);
  gvFreeRenderData(data);
  if (f == ChartFormat::Svg) out = tidy_svg(out);
  return out;
}

}  // namespace snapdiff
