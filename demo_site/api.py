"""The JSON API under /api/: each write is limited by an action policy through ActionThrottle."""

from django.db.models import Count, Q
from django.shortcuts import get_object_or_404
from rest_framework import generics, status
from rest_framework.permissions import IsAuthenticatedOrReadOnly
from rest_framework.response import Response
from rest_framework.views import APIView

import throttling
from throttling.throttles import ActionThrottle

from .models import Like, Post, Reply
from .serializers import PostSerializer, ReplySerializer


def posts_with_counts():
    # Explicit order: Meta.ordering does not apply to aggregating (GROUP BY) queries.
    return (
        Post.objects.select_related("author")
        .filter(is_public=True)
        .annotate(
            reply_count=Count("replies", filter=Q(replies__is_public=True), distinct=True),
            like_count=Count("likes", distinct=True),
        )
        .order_by("-created", "-pk")
    )


class ThreadReplyThrottle(ActionThrottle):
    """A second limit on replies: "thread-reply" counts per member and thread."""

    action = "thread-reply"

    def get_target(self, request, view):
        return view.kwargs["pk"]


class SiteWidePostThrottle(ActionThrottle):
    """ "post-sitewide": new posts across the whole site (a shadow policy in the demo)."""

    action = "post-sitewide"


class PostList(generics.ListCreateAPIView):
    serializer_class = PostSerializer
    # Permissions run before throttles in DRF, so a visitor's refused write costs no quota.
    permission_classes = [IsAuthenticatedOrReadOnly]
    throttle_classes = [ActionThrottle, SiteWidePostThrottle]
    throttle_action = "post"

    def get_queryset(self):
        return posts_with_counts()

    def perform_create(self, serializer):
        post = serializer.save(author=self.request.user)
        post.reply_count = post.like_count = 0  # what the list's annotations would say


class PostDetail(generics.RetrieveAPIView):
    serializer_class = PostSerializer

    def get_queryset(self):
        return posts_with_counts()


class ReplyList(generics.ListCreateAPIView):
    serializer_class = ReplySerializer
    permission_classes = [IsAuthenticatedOrReadOnly]
    throttle_classes = [ActionThrottle, ThreadReplyThrottle]
    throttle_action = "reply"
    # The reply's text, judged against the policy's limits on repeated content (a spam wave).
    throttle_content = "body"

    def get_post(self):
        return get_object_or_404(Post, pk=self.kwargs["pk"])

    def get_queryset(self):
        return self.get_post().replies.filter(is_public=True).select_related("author")

    def perform_create(self, serializer):
        # A held decision (a wave, say, under the answer "hold"): the reply is written hidden and
        # queued for a moderator (Throttling › Held for review in the admin).
        decision = getattr(self.request, "throttling_decision", None)
        text = serializer.validated_data.get("body")
        with throttling.holding(decision, Reply, {"is_public": False}, request=self.request, text=text):
            serializer.save(post=self.get_post(), author=self.request.user)


class LikeView(APIView):
    """POST likes a post, DELETE takes the like back; both count as the "like" action."""

    permission_classes = [IsAuthenticatedOrReadOnly]
    throttle_classes = [ActionThrottle]
    throttle_actions = {"POST": "like", "DELETE": "like"}

    def post(self, request, pk):
        post = get_object_or_404(Post, pk=pk)
        _, created = Like.objects.get_or_create(post=post, user=request.user)
        return self._answer(post, liked=True, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def delete(self, request, pk):
        post = get_object_or_404(Post, pk=pk)
        deleted, _ = Like.objects.filter(post=post, user=request.user).delete()
        if not deleted:
            # An error status gives the reserved "like" back: nothing happened.
            return Response({"detail": "You have not liked this post."}, status=status.HTTP_404_NOT_FOUND)
        return self._answer(post, liked=False, status=status.HTTP_200_OK)

    def _answer(self, post, *, liked, status):
        return Response({"post": post.pk, "liked": liked, "like_count": post.likes.count()}, status=status)
