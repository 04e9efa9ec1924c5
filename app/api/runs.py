"""runs routes."""

from fastapi import APIRouter

router = APIRouter(tags=["Runs"])
