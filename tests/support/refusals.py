"""The 429 page of a refused post, and reading its editable form the way a browser would send it."""

from html.parser import HTMLParser


def refused_page(member, policy, view, data, path="/"):
    """The rendered page `view` answers `member`'s second post of `data` with, on a limit of one."""
    from django.test import RequestFactory

    policy("reply", 60, 1)
    factory = RequestFactory()
    for _ in range(2):
        request = factory.post(path, data)
        request.user = member
        response = view(request)
    response.render()
    return response


class RefusalForm(HTMLParser):
    """The form of a 429 page: its attributes, and each control as (tag, attributes, text)."""

    def __init__(self, content):
        super().__init__()
        self.attrs, self.controls, self._open, self._option = None, [], None, None
        self.feed(content)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and attrs.get("class") == "throttling-resend":
            self.attrs = attrs
        elif self.attrs is not None and tag in ("input", "textarea", "select"):
            control = [tag, attrs, "", []]
            self.controls.append(control)
            self._open = control if tag != "input" else None
        elif tag == "option" and self._open is not None:
            self._option = [attrs.get("value"), "", "selected" in attrs]
            self._open[3].append(self._option)

    def handle_endtag(self, tag):
        if tag in ("textarea", "select"):
            self._open = None
        elif tag == "option":
            self._option = None

    def handle_data(self, data):
        if self._option is not None:
            self._option[1] += data
        elif self._open is not None and self._open[0] == "textarea":
            self._open[2] += data

    def named(self, name):
        """The controls named `name`: [(tag, attributes, text, options)]."""
        return [c for c in self.controls if c[1].get("name") == name]

    def data(self):
        """What submitting the form sends, as [(name, value)] in order."""
        sent = []
        for tag, attrs, text, options in self.controls:
            name = attrs.get("name")
            if tag == "textarea":
                sent.append((name, text))
            elif tag == "select":
                sent += [(name, value) for value, _label, selected in options if selected]
            elif attrs.get("type") == "checkbox":
                if "checked" in attrs:
                    sent.append((name, attrs.get("value", "on")))
            elif attrs.get("type") != "submit":
                sent.append((name, attrs.get("value", "")))
        return sent


class PageForm(RefusalForm):
    """The first POST form of an app's page that has a control named `containing`, read the same way."""

    def __init__(self, content, containing):
        self.containing = containing
        self._forms = []
        super().__init__(content)
        for attrs, controls in self._forms:
            if any(c[1].get("name") == containing for c in controls):
                self.attrs, self.controls = attrs, controls
                return
        self.attrs, self.controls = None, []

    def handle_starttag(self, tag, attrs):
        if tag == "form":
            attrs = dict(attrs)
            if (attrs.get("method") or "").lower() == "post":
                self._forms.append((attrs, []))
                self.attrs, self.controls = attrs, self._forms[-1][1]
            else:
                self.attrs = None
            return
        super().handle_starttag(tag, attrs)

    def handle_endtag(self, tag):
        if tag == "form":
            self.attrs = None
        super().handle_endtag(tag)

    def data(self):
        """What a browser sends for the form as the page fills it: a single select with nothing
        selected sends its first option; buttons are left out (pass the one pressed yourself)."""
        sent = []
        for tag, attrs, text, options in self.controls:
            name = attrs.get("name")
            if not name or "disabled" in attrs:
                continue
            if tag == "select" and not any(selected for _v, _l, selected in options) and options:
                if "multiple" not in attrs:
                    sent.append((name, options[0][0]))
            elif tag == "textarea":
                sent.append((name, text))
            elif tag == "select":
                sent += [(name, value) for value, _label, selected in options if selected]
            elif attrs.get("type") in ("checkbox", "radio"):
                if "checked" in attrs:
                    sent.append((name, attrs.get("value", "on")))
            elif attrs.get("type") not in ("submit", "button", "image", "reset", "file"):
                sent.append((name, attrs.get("value", "")))
        return sent
