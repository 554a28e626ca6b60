"""MkDocs hooks.

- The site's front page is README.md and its Contributing page CONTRIBUTING.md, read from
  the repository root, so each text lives once, where GitHub shows it too; the README's
  links into docs/ are made relative to the site.
- The docstrings' `>>>` examples (doctests, written without an "Examples:" heading) are
  shown as Python sessions in code blocks, not as Markdown quotes.
"""
import pathlib
import re

from markdown import Extension
from markdown.preprocessors import Preprocessor
from mkdocs.plugins import event_priority

ROOT = pathlib.Path(__file__).resolve().parent.parent
FROM_ROOT = {"index.md": "README.md", "contributing.md": "CONTRIBUTING.md"}


def on_page_markdown(markdown, page, config, files):
    source = FROM_ROOT.get(page.file.src_uri)
    if source is None:
        return markdown
    text = (ROOT / source).read_text()
    text = re.sub(r"\]\(docs/", "](", text)                     # README: docs/x.md -> x.md
    return re.sub(r"\]\(CONTRIBUTING\.md\)", "](contributing.md)", text)


class _Doctests(Preprocessor):
    """Each run of lines from a `>>> ` line to the next blank line becomes a ```pycon block
    (lines inside fences are left alone)."""

    def run(self, lines):
        out, fenced, session = [], False, False
        for line in lines:
            if line.lstrip().startswith("```"):
                fenced = not fenced
            if not fenced and not session and line.startswith(">>> "):
                out += ["", "```pycon"]
                session = True
            elif session and not line.strip():
                out.append("```")
                session = False
            out.append(line)
        return out + (["```"] if session else [])


class DoctestBlocks(Extension):
    def extendMarkdown(self, md):
        md.preprocessors.register(_Doctests(md), "jitad_doctests", 27)   # after whitespace, before fences


@event_priority(100)   # before mkdocstrings reads the extensions its docstrings are rendered with
def on_config(config):
    config.markdown_extensions.append(DoctestBlocks())
    return config
