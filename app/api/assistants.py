"""assistants routes."""

from fastapi import APIRouter

router = APIRouter(tags=["Assistants"])
