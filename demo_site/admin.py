from django.contrib import admin

from .models import Like, Post, Reply


class ReplyInline(admin.TabularInline):
    model = Reply
    extra = 0
    raw_id_fields = ["author"]


@admin.register(Post)
class PostAdmin(admin.ModelAdmin):
    list_display = ["title", "author", "created"]
    search_fields = ["title", "body", "author__username"]
    raw_id_fields = ["author"]
    inlines = [ReplyInline]


@admin.register(Like)
class LikeAdmin(admin.ModelAdmin):
    list_display = ["post", "user", "created"]
    raw_id_fields = ["post", "user"]
