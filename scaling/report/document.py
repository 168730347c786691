"""The report as a document: a list of blocks, rendered to Markdown or to self-contained HTML.

    doc = Doc()
    doc.h(1, "Scaling-law report"); doc.p("The fitted law: **L = ...**")
    doc.table(["constant", "value"], [["alpha", "0.34"]])
    doc.figure("frontiers", 6, "Iso-loss contours ...", "Figure caption.")
    doc.markdown()                          # figures linked from figures/NAME.png and .svg
    doc.html("title", {"frontiers": png})   # one file, the PNGs embedded as data URIs

Inline markup is the Markdown subset both renderings share: `code` and **bold**.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Sequence

FIGURE_DIR = "figures"

_CSS = """body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px;
  margin: 2em auto; padding: 0 1em; line-height: 1.45; color: #222; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f3f3; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1.2em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-style: italic; font-size: 0.92em; color: #444; }
code, pre { background: #f6f6f6; font-family: Menlo, Consolas, monospace; font-size: 0.9em; }
pre { padding: 0.6em; overflow-x: auto; }
"""


class Doc:
    """Headings, paragraphs, lists, tables and figures, in order."""

    def __init__(self) -> None:
        self.blocks: list[tuple] = []

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def ul(self, items: Iterable[str]) -> None:
        items = list(items)
        if items:                       # an empty list renders as nothing, not as an empty <ul>
            self.blocks.append(("ul", items))

    def table(self, header: Sequence[str], rows: Iterable[Sequence[object]], align: list[str] | None = None) -> None:
        """align: 'l' or 'r' per column; by default the first left (labels), the rest right (numbers)."""
        align = align or ["l"] + ["r"] * (len(header) - 1)
        self.blocks.append(("table", list(header), [list(r) for r in rows], align))

    def figure(self, name: str, number: int, title: str, caption: str) -> None:
        self.blocks.append(("fig", name, number, title, caption))

    def markdown(self) -> str:
        return "\n\n".join(_markdown(block) for block in self.blocks) + "\n"

    def html(self, title: str, images: dict) -> str:
        """One HTML page; `images` maps each figure's name to its PNG bytes."""
        body = "\n".join(_html(block, images) for block in self.blocks)
        return (f"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                f"<title>{html.escape(title)}</title>\n<style>\n{_CSS}</style>\n</head>\n<body>\n"
                + body + "\n</body>\n</html>\n")


def _markdown(block: tuple) -> str:
    kind = block[0]
    if kind == "h":
        return "#" * block[1] + " " + block[2]
    if kind == "p":
        return block[1]
    if kind == "ul":
        return "\n".join(f"- {item}" for item in block[1])
    if kind == "table":
        _, header, rows, align = block
        cell = lambda s: str(s).replace("|", "\\|")  # noqa: E731
        lines = ["| " + " | ".join(cell(h) for h in header) + " |",
                 "|" + "|".join("---:" if a == "r" else ":---" for a in align) + "|"]
        return "\n".join(lines + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows])
    _, name, number, title, caption = block
    return (f"![Figure {number}: {title}]({FIGURE_DIR}/{name}.png)\n\n"
            f"*Figure {number}. {caption}* ([SVG]({FIGURE_DIR}/{name}.svg))")


def _html(block: tuple, images: dict) -> str:
    kind = block[0]
    if kind == "h":
        return f"<h{block[1]}>{_inline(block[2])}</h{block[1]}>"
    if kind == "p":
        return f"<p>{_inline(block[1])}</p>"
    if kind == "ul":
        return "<ul>\n" + "\n".join(f"<li>{_inline(i)}</li>" for i in block[1]) + "\n</ul>"
    if kind == "table":
        _, header, rows, align = block
        style = lambda a: ' class="num"' if a == "r" else ""  # noqa: E731
        head = "".join(f"<th{style(a)}>{_inline(str(h))}</th>" for h, a in zip(header, align))
        trs = "\n".join("<tr>" + "".join(f"<td{style(a)}>{_inline(str(c))}</td>" for c, a in zip(row, align))
                        + "</tr>" for row in rows)
        return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{trs}\n</tbody>\n</table>"
    _, name, number, title, caption = block
    data = base64.b64encode(images[name]).decode("ascii")
    return (f'<figure id="{name}"><img alt="Figure {number}: {html.escape(title)}" '
            f'src="data:image/png;base64,{data}">\n'
            f"<figcaption>Figure {number}. {_inline(caption)}</figcaption></figure>")


def _inline(text: str) -> str:
    """Escape for HTML, then `code` and **bold** as in the Markdown."""
    s = html.escape(text, quote=False)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", s)
