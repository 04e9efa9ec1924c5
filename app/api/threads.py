"""threads routes."""

from fastapi import APIRouter

router = APIRouter(tags=["Threads"])
