#!/usr/bin/env python3
"""The structure of an HTML page snapdiff writes, as plain text lines: what the
golden test compares for HTML (tests/golden/*.html.structure).

One line per block of visible text, whitespace collapsed:
  h1 TEXT / h2 TEXT ...   headings
  | CELL | CELL |         a table row, header and data cells alike
  - TEXT                  a list item
  TEXT                    any other block (paragraph, caption, card, ...)
  [svg]                   a chart, its drawing left out (Graphviz's output:
                          positions and shapes, not words or numbers)
The page's title is the first line. <head>, <style> and <script> are left out
(the CSS and the few lines of JavaScript are the same for every page), and so
are attributes: a change of class or colour does not show, a changed heading,
row, cell or number does.
Usage: html_structure.py [FILE]   (standard input without FILE)"""
import sys
from html.parser import HTMLParser

HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
# Elements whose start or end ends a line of text.
BLOCKS = HEADINGS | {
    "html", "body", "header", "footer", "main", "nav", "section", "article", "aside", "div", "p", "pre",
    "blockquote", "figure", "figcaption", "ul", "ol", "li", "dl", "dt", "dd", "details", "summary", "table",
    "thead", "tbody", "tfoot", "caption", "br", "hr", "form", "label",
}
SKIPPED = {"style", "script", "head", "svg"}
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Structure(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.lines = []
        self.text = []  # the text of the block being read
        self.blocks = []  # open block elements, innermost last
        self.skip = []  # open skipped elements (their content is left out)
        self.title = None
        self.row = None  # the cells of the table row being read
        self.cell = None

    def flush(self):
        text = " ".join("".join(self.text).split())
        self.text = []
        if not text:
            return
        if self.cell is not None:
            self.cell.append(text)
            return
        kind = next((b for b in reversed(self.blocks) if b in HEADINGS or b == "li"), None)
        self.lines.append(f"{kind} {text}" if kind in HEADINGS else f"- {text}" if kind == "li" else text)

    def handle_starttag(self, tag, attrs):
        if tag == "title" and self.title is None and all(s == "head" for s in self.skip):
            self.skip.append(tag)
            self.title = []
            return
        if tag in SKIPPED:
            if tag == "svg" and not self.skip:
                self.flush()
                self.lines.append("[svg]")
            if tag not in VOID:
                self.skip.append(tag)
            return
        if self.skip:
            return
        if tag == "a":  # links side by side (a menu) are words apart
            self.text.append(" ")
        elif tag == "tr":
            self.flush()
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.flush()
            self.cell = []
        elif tag in BLOCKS:
            self.flush()
            if tag not in VOID:
                self.blocks.append(tag)

    def handle_startendtag(self, tag, attrs):
        if tag in BLOCKS and not self.skip and self.cell is None:
            self.flush()

    def handle_endtag(self, tag):
        if self.skip:
            if tag == self.skip[-1]:
                self.skip.pop()
                if tag == "title" and self.title is not None and not isinstance(self.title, str):
                    self.title = " ".join("".join(self.title).split())
                    self.lines.append(f"title {self.title}")
            return
        if tag == "a":
            self.text.append(" ")
        elif tag in ("td", "th") and self.cell is not None:
            self.flush()
            self.row.append(" ".join(self.cell))
            self.cell = None
        elif tag == "tr" and self.row is not None:
            if self.cell is not None:
                self.handle_endtag("td")
            self.lines.append("| " + " | ".join(self.row) + " |")
            self.row = None
        elif tag in BLOCKS:
            self.flush()
            if tag in self.blocks:
                while self.blocks.pop() != tag:
                    pass

    def handle_data(self, data):
        if self.skip:
            if self.skip[-1] == "title" and isinstance(self.title, list):
                self.title.append(data)
            return
        self.text.append(data)


def structure(html):
    p = Structure()
    p.feed(html)
    p.close()
    p.flush()
    return "".join(line + "\n" for line in p.lines)


if __name__ == "__main__":
    raw = open(sys.argv[1], "rb").read() if len(sys.argv) > 1 else sys.stdin.buffer.read()
    sys.stdout.buffer.write(structure(raw.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape"))
