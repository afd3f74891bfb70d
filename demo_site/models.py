"""Posts, replies and likes: the behaviour the demo community throttles."""

from django.conf import settings
from django.db import models
from django.urls import reverse


class Post(models.Model):
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="posts")
    title = models.CharField(max_length=200)
    body = models.TextField(max_length=10000)
    created = models.DateTimeField(auto_now_add=True)
    # False while held for review (see the throttling guide › Held for review): shown to nobody but moderators.
    is_public = models.BooleanField(default=True)

    class Meta:
        ordering = ["-created", "-pk"]

    def __str__(self):
        return self.title

    def get_absolute_url(self):
        return reverse("post-detail", args=[self.pk])


class Reply(models.Model):
    post = models.ForeignKey(Post, on_delete=models.CASCADE, related_name="replies")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="replies")
    body = models.TextField(max_length=5000)
    created = models.DateTimeField(auto_now_add=True)
    # False while held for review: shown to nobody but moderators.
    is_public = models.BooleanField(default=True)

    class Meta:
        ordering = ["created", "pk"]
        verbose_name_plural = "replies"

    def __str__(self):
        return f"{self.author} on {self.post}"


class Like(models.Model):
    post = models.ForeignKey(Post, on_delete=models.CASCADE, related_name="likes")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="likes")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["post", "user"], name="demo_like_once_per_post")]

    def __str__(self):
        return f"{self.user} likes {self.post}"
