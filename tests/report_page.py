"""A report page read back for the tests: its table cells, images, URLs and headings."""

from html.parser import HTMLParser


class ReportPage(HTMLParser):
    """The page's table cells (header -> text), image sources, every URL-valued
    attribute and the section headings."""

    def __init__(self, text):
        super().__init__()
        self.cells, self.images, self.urls, self.headings = {}, [], [], []
        self._tag, self._header = None, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self._tag = tag
        for name, value in attrs:
            if name in ("src", "href", "action", "data"):
                self.urls.append(value)
        if tag == "img":
            self.images.append(dict(attrs))

    def handle_data(self, data):
        if self._tag == "th":
            self._header = data
        elif self._tag == "td" and self._header is not None:
            self.cells[self._header] = data
            self._header = None
        elif self._tag == "h2":
            self.headings.append(data)
