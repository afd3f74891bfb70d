"""API representations; blank text fails validation (400), which refunds the reserved quota."""

from rest_framework import serializers

from .models import Post, Reply


class ReplySerializer(serializers.ModelSerializer):
    author = serializers.CharField(source="author.username", read_only=True)

    class Meta:
        model = Reply
        fields = ["id", "post", "author", "body", "created"]
        read_only_fields = ["post", "created"]


class PostSerializer(serializers.ModelSerializer):
    author = serializers.CharField(source="author.username", read_only=True)
    url = serializers.URLField(source="get_absolute_url", read_only=True)
    reply_count = serializers.IntegerField(read_only=True)
    like_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Post
        fields = ["id", "url", "author", "title", "body", "created", "reply_count", "like_count"]
        read_only_fields = ["created"]
