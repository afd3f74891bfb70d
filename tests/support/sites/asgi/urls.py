"""The ASGI test's site: async views whose refusal page has a form with a ModelChoiceField."""

from django import forms
from django.contrib.auth.models import Group
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import path

from throttling.decorators import throttle_action


class RoomForm(forms.Form):
    """A post to a room; the rooms are rows, some of which the view hides from most members."""

    room = forms.ModelChoiceField(queryset=Group.objects.all(), label="Room")
    text = forms.CharField(widget=forms.Textarea, label="Your post")


async def room_post(request):
    """The forum's own async view (bound in THROTTLING_VIEWS): a redirect once posted."""
    return redirect("/posted/")


@throttle_action("reply", form=RoomForm)
async def decorated_post(request):
    """The site's own async view, decorated."""
    return HttpResponse("posted", status=201)


urlpatterns = [
    path("room/post/", room_post, name="room-post"),
    path("decorated/", decorated_post, name="decorated-post"),
]
