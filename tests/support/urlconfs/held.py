"""URLconf of the held-for-review tests: a site's own view with @throttle_action(hold=...), and a DRF view
that hides what its serializer saves with throttling.holding() and the decision ActionThrottle gives it."""

from django.http import HttpResponseRedirect
from django.urls import path
from rest_framework import serializers
from rest_framework.generics import CreateAPIView

import throttling
from demo_site.models import Post
from throttling.decorators import throttle_action
from throttling.throttles import ActionThrottle


@throttle_action("post", counts="created:demo_site.Post", content="comment", hold={"is_public": False})
def post(request):
    Post.objects.create(author=request.user, title="Mine", body=request.POST.get("comment", ""))
    return HttpResponseRedirect("/")


class PostSerializer(serializers.ModelSerializer):
    comment = serializers.CharField(source="body")

    class Meta:
        model = Post
        fields = ["comment"]


class PostCreate(CreateAPIView):
    serializer_class = PostSerializer
    throttle_classes = [ActionThrottle]
    throttle_action = "post"

    def perform_create(self, serializer):
        decision = self.request.throttling_decision
        text = serializer.validated_data["body"]
        with throttling.holding(decision, Post, {"is_public": False}, request=self.request, text=text):
            serializer.save(author=self.request.user, title="From the API")


urlpatterns = [
    path("held/post/", post),
    path("held/api/", PostCreate.as_view()),
]
