"""The students' page of "Ask the class": /answer?code=... on a phone (dashboard/classroom/student.py draws it)."""

from dashboard.classroom.follow import follower_view
from dashboard.classroom.student import student_page

student_page(follow=follower_view)
