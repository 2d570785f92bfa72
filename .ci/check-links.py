#!/usr/bin/env python3
"""Checks every relative link and anchor, offline.

    python3 .ci/check-links.py --html target/book  FILE.md ...

--html DIR: every page of a built mdBook: each relative href/src must name a
file of the book, and each #fragment an id on the page it points to.
FILE.md: each relative link of a Markdown file (as GitHub renders it) must
name a file or directory of the repository, and a #fragment of a Markdown
file a heading of it (GitHub's anchors). Links with a scheme (https:, mailto:)
are not followed: nothing here uses the network.

Prints one line per broken link (file, line, link, what is wrong) and exits 1
if there is any; else prints what it checked and exits 0.
"""
import argparse
import html.parser
import os
import re
import sys
import urllib.parse

SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def is_external(target):
    return bool(SCHEME.match(target)) or target.startswith("//")


# --- Markdown, as GitHub renders it -----------------------------------------

def github_slug(heading):
    text = re.sub(r"`([^`]*)`", r"\1", heading)            # code spans keep their text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)     # links keep their text
    text = re.sub(r"<[^>]+>", "", text)                      # inline HTML goes
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def markdown_lines(path):
    """(line number, line) outside fenced code blocks."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            stripped = line.lstrip()
            m = re.match(r"(```+|~~~+)", stripped)
            if m:
                if fence is None:
                    fence = m.group(1)[0] * len(m.group(1))
                    continue
                if stripped.startswith(fence) and stripped.strip() == stripped.strip()[0] * len(stripped.strip()):
                    fence = None
                    continue
            if fence is None:
                yield n, line.rstrip("\n")


_anchor_cache = {}


def markdown_anchors(path):
    if path not in _anchor_cache:
        seen = {}
        anchors = set()
        for _, line in markdown_lines(path):
            m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if m:
                slug = github_slug(m.group(2))
                k = seen.get(slug, 0)
                anchors.add(slug if k == 0 else f"{slug}-{k}")
                seen[slug] = k + 1
            for explicit in re.findall(r'<a\s+(?:name|id)="([^"]+)"', line):
                anchors.add(explicit)
        _anchor_cache[path] = anchors
    return _anchor_cache[path]


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")


def check_markdown(path, errors):
    count = 0
    base = os.path.dirname(path)
    for n, line in markdown_lines(path):
        plain = re.sub(r"``[^`]*``|`[^`]*`", "``", line)  # links are not in code spans
        targets = LINK.findall(plain)
        m = REFDEF.match(plain)
        if m:
            targets.append(m.group(1))
        for target in targets:
            if is_external(target):
                continue
            count += 1
            where = f"{path}:{n}: {target}"
            file_part, _, fragment = target.partition("#")
            file_part = urllib.parse.unquote(file_part.split("?")[0])
            dest = os.path.normpath(os.path.join(base, file_part)) if file_part else path
            if not os.path.exists(dest):
                errors.append(f"{where}: no file {dest}")
                continue
            if fragment and dest.endswith(".md"):
                if fragment not in markdown_anchors(dest):
                    errors.append(f"{where}: no heading #{fragment} in {dest}")
    return count


# --- a built mdBook -----------------------------------------------------------

class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if name in ("href", "src") and value:
                self.links.append((self.getpos()[0], value))


_pages = {}


def page(path):
    if path not in _pages:
        p = Page()
        with open(path, encoding="utf-8") as f:
            p.feed(f.read())
        _pages[path] = p
    return _pages[path]


def check_html(root, errors):
    count = 0
    for dirpath, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".html") or name == "404.html":
                continue  # 404.html links from the site root (<base href="/">)
            path = os.path.join(dirpath, name)
            for n, target in page(path).links:
                if is_external(target) or target.startswith("/"):
                    continue
                count += 1
                where = f"{os.path.relpath(path, root)}:{n}: {target}"
                file_part, _, fragment = target.partition("#")
                file_part = urllib.parse.unquote(file_part.split("?")[0])
                dest = os.path.normpath(os.path.join(dirpath, file_part)) if file_part else path
                if os.path.isdir(dest):
                    dest = os.path.join(dest, "index.html")
                if not os.path.exists(dest):
                    errors.append(f"{where}: no file {os.path.relpath(dest, root)}")
                    continue
                if fragment and dest.endswith(".html"):
                    if urllib.parse.unquote(fragment) not in page(dest).ids:
                        errors.append(f"{where}: no id #{fragment} in {os.path.relpath(dest, root)}")
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--html", action="append", default=[], help="a built mdBook directory")
    ap.add_argument("markdown", nargs="*", help="Markdown files")
    args = ap.parse_args()
    errors = []
    checked = 0
    for root in args.html:
        if not os.path.isdir(root):
            errors.append(f"{root}: not a directory (build the book first)")
            continue
        checked += check_html(root, errors)
    for md in args.markdown:
        if not os.path.isfile(md):
            errors.append(f"{md}: no such file")
            continue
        checked += check_markdown(md, errors)
    for e in errors:
        print(e)
    if errors:
        print(f"check-links: {len(errors)} broken of {checked} links", file=sys.stderr)
        return 1
    print(f"check-links: {checked} relative links and anchors, none broken")
    return 0


if __name__ == "__main__":
    sys.exit(main())
