"""Pages that show penalty notices three ways: Django's messages, the context variable and the template tag."""

from django.contrib.messages import get_messages
from django.http import HttpResponse
from django.template import engines
from django.urls import path

_TAG = engines["django"].from_string("{% load throttling_tags %}<body>{% throttling_notices %}</body>")
_VARIABLE = engines["django"].from_string(
    "<body>{% for notice in throttling_notices %}<p class='{{ notice.kind }}'>{{ notice }}</p>{% endfor %}</body>"
)


def messages_page(request):
    return HttpResponse("\n".join(f"{m.tags}|{m}" for m in get_messages(request)))


def tag_page(request):
    return HttpResponse(_TAG.render({}, request))


def variable_page(request):
    return HttpResponse(_VARIABLE.render({}, request))


urlpatterns = [
    path("messages/", messages_page),
    path("tag/", tag_page),
    path("variable/", variable_page),
]
