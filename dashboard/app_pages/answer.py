"""The students' page of "Ask the class": /answer?code=... on a phone (dashboard/classroom/ui.py draws it)."""

from dashboard.classroom.follow import follower_view
from dashboard.classroom.ui import student_page

student_page(follow=follower_view)
