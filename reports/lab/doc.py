"""A small document model: blocks (headings, paragraphs, notes, lists,
tables, code, images) rendered both to Markdown (summary.md) and to a
self-contained HTML page (index.html), so that each reads on its own.
"""

import html
import re


class Doc:
    """Blocks rendered both to Markdown and to HTML.

    Inline text may use **bold**, `code` and [label](href).
    """

    def __init__(self):
        self.blocks = []

    def h(self, level, text):
        self.blocks.append(("h", level, text))

    def p(self, text):
        self.blocks.append(("p", text))

    def note(self, text):
        self.blocks.append(("note", text))

    def ul(self, items):
        self.blocks.append(("ul", list(items)))

    def table(self, headers, rows, notes=()):
        self.blocks.append(("table", headers, rows, list(notes)))

    def code(self, title, text):
        self.blocks.append(("code", title, text))

    def img(self, src, alt):
        self.blocks.append(("img", src, alt))

    # -- markdown
    @staticmethod
    def _md_cell(s):
        s = str(s).replace("|", "\\|").replace("\n", " ")
        return "\\*" if s == "*" else s

    def to_md(self):
        out = []
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out.append("#" * b[1] + " " + b[2])
            elif kind == "p":
                out.append(b[1])
            elif kind == "note":
                out.append("> " + b[1])
            elif kind == "ul":
                out.append("\n".join("- " + i for i in b[1]))
            elif kind == "table":
                _, headers, rows, notes = b
                lines = ["| " + " | ".join(self._md_cell(h) for h in headers)
                         + " |",
                         "|" + "|".join("---" for _ in headers) + "|"]
                lines += ["| " + " | ".join(self._md_cell(c) for c in r)
                          + " |" for r in rows]
                out.append("\n".join(lines))
                if notes:
                    out.append("\n".join(f"{n}  " for n in notes).rstrip())
            elif kind == "code":
                fence = "````" if "```" in b[2] else "```"
                out.append(f"{b[1]}:\n\n{fence}\n{b[2].rstrip()}\n{fence}")
            elif kind == "img":
                out.append(f"![{b[2]}]({b[1]})")
        return "\n\n".join(out) + "\n"

    # -- html
    @staticmethod
    def _inline(text):
        s = html.escape(str(text), quote=False)
        s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
        s = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", s)
        s = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)",
                   lambda m: f'<a href="{html.escape(m.group(2))}">'
                             f'{m.group(1)}</a>', s)
        return s

    @staticmethod
    def _anchor(text):
        return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")

    def to_html(self, title):
        out = ["<!DOCTYPE html>",
               '<html lang="en"><head><meta charset="utf-8">',
               f"<title>{html.escape(title)}</title>", "<style>", CSS,
               "</style></head><body>"]
        for b in self.blocks:
            kind = b[0]
            if kind == "h":
                out.append(f'<h{b[1]} id="{self._anchor(b[2])}">'
                           f"{self._inline(b[2])}</h{b[1]}>")
            elif kind == "p":
                out.append(f"<p>{self._inline(b[1])}</p>")
            elif kind == "note":
                out.append(f'<div class="note">{self._inline(b[1])}</div>')
            elif kind == "ul":
                out.append("<ul>" + "".join(f"<li>{self._inline(i)}</li>"
                                            for i in b[1]) + "</ul>")
            elif kind == "table":
                _, headers, rows, notes = b
                t = ["<table><thead><tr>"]
                t += [f"<th>{self._inline(h)}</th>" for h in headers]
                t.append("</tr></thead><tbody>")
                for r in rows:
                    t.append("<tr>" + "".join(
                        f"<td{self._cls(c)}>{self._inline(c)}</td>"
                        for c in r) + "</tr>")
                t.append("</tbody></table>")
                out.append("".join(t))
                for n in notes:
                    out.append(f'<p class="fn">{self._inline(n)}</p>')
            elif kind == "code":
                out.append(f"<details><summary>{self._inline(b[1])}"
                           f"</summary><pre>{html.escape(b[2])}</pre>"
                           "</details>")
            elif kind == "img":
                out.append(f'<p><img src="{html.escape(b[1])}" '
                           f'alt="{html.escape(b[2])}"></p>')
        out.append("</body></html>")
        return "\n".join(out) + "\n"

    @staticmethod
    def _cls(cell):
        c = str(cell)
        if re.fullmatch(r"[-+]?[\d.]+(%| ?[µm]?s| ns)?|n/a|\*|[\d.]+-[\d.]+",
                        c):
            return ' class="num"'
        return ""


CSS = """
body { font-family: sans-serif; max-width: 1150px; margin: 1em auto;
       padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 3px 8px; text-align: left; }
th { background: #eee; }
td.num { text-align: right; font-family: monospace; }
.note { border: 2px solid #d9a400; background: #fff6d5; padding: 0.6em;
        margin: 1em 0; }
.fn { font-size: 0.85em; color: #444; margin: 0.2em 0; }
pre { background: #f5f5f5; padding: 0.5em; overflow-x: auto; }
img { max-width: 100%; }
code { background: #f0f0f0; padding: 0 2px; }
"""
