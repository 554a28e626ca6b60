"""MkDocs hook: the site's front page is README.md and its Contributing page CONTRIBUTING.md,
read from the repository root, so each text lives once, where GitHub shows it too. The
README's links into docs/ are made relative to the site."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
FROM_ROOT = {"index.md": "README.md", "contributing.md": "CONTRIBUTING.md"}


def on_page_markdown(markdown, page, config, files):
    source = FROM_ROOT.get(page.file.src_uri)
    if source is None:
        return markdown
    text = (ROOT / source).read_text()
    text = re.sub(r"\]\(docs/", "](", text)                     # README: docs/x.md -> x.md
    return re.sub(r"\]\(CONTRIBUTING\.md\)", "](contributing.md)", text)
