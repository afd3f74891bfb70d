from django import forms


class CommentForm(forms.Form):
    comment = forms.CharField(label="Your comment", widget=forms.Textarea, max_length=2000)


class TopicForm(forms.Form):
    title = forms.CharField(max_length=100)
