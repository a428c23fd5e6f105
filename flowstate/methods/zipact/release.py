"""ZipAct's released prompts (MIT, ``Thomas-mci-21/ZipAct``): module-level prompts of its prompt
files and the two user templates, f-string bodies inside ``ZipActAgent`` methods."""

from __future__ import annotations

from flowstate.data import PromptRelease, ReleasedLiteral

_PROMPTS = "src/prompts/zipact_prompts.py"
_SCI = "src/prompts/sciworld_prompts.py"
_WEB = "src/prompts/webshop_prompts.py"
_AGENT = "src/agents/zipact.py"
LITERALS = (
    ReleasedLiteral("alfworld_init_state.txt", _PROMPTS, "ALFWORLD_ZIPACT_INIT_STATE_PROMPT",
            "134aff4e663f87e7df256ee12899b9f45397687308191f0efd73e9359147d513"),
    ReleasedLiteral("alfworld_updater_system.txt", _PROMPTS, "ALFWORLD_ZIPACT_UPDATER_SYSTEM_PROMPT",
            "af71771e04fb75f6115d52e73e18d39d6f874dd2fc0cc8e11571b0edb492ce6f"),
    ReleasedLiteral("alfworld_actor_system.txt", _PROMPTS, "ALFWORLD_ZIPACT_ACTOR_SYSTEM_PROMPT",
            "8e9b91feebcf4d9b6a439e84c3278c36110edf538f8bef9be7d41e08025f3d00"),
    ReleasedLiteral("sciworld_init_state.txt", _SCI, "SCIWORLD_ZIPACT_INIT_STATE_PROMPT",
            "5f5ec23735f90e8923675f00401fcd50350ede310ef44b0a87d41401042b594c"),
    ReleasedLiteral("sciworld_updater_system.txt", _SCI, "SCIWORLD_ZIPACT_UPDATER_SYSTEM_PROMPT",
            "8746eee11f0dd1c64858973824e1a10dcbfde1abff6dee24af3d13821316a0d9"),
    ReleasedLiteral("sciworld_actor_system.txt", _SCI, "SCIWORLD_ZIPACT_ACTOR_SYSTEM_PROMPT",
            "1b82d370d477edc14d5bfa48b344de06fdf11b092a5361fd3087f3dcf1df6b9c"),
    ReleasedLiteral("webshop_init_state.txt", _WEB, "WEBSHOP_ZIPACT_INIT_STATE_PROMPT",
            "f8cd85dae7ec86e8a7f98f2e704cee39c3bc9ee6cb7ebe3607842b163e0df0cc"),
    ReleasedLiteral("webshop_updater_system.txt", _WEB, "WEBSHOP_ZIPACT_UPDATER_SYSTEM_PROMPT",
            "a43e05196ee73c232c41949c42497134ae7fb178f0fcbf1b733616b784113ddd"),
    ReleasedLiteral("webshop_actor_system.txt", _WEB, "WEBSHOP_ZIPACT_ACTOR_SYSTEM_PROMPT",
            "db8c46939069632f6602e94cafda668102ab2d9879d0aa7845890a33c7872a66"),
    ReleasedLiteral("agent_updater_user_template.txt", _AGENT, "ZipActAgent._update_state.prompt",
            "d99bd0563bbe8733949a3951b3d2e8016196f882f6045cb31570125ff8402856"),
    ReleasedLiteral("agent_actor_user_template.txt", _AGENT, "ZipActAgent._act.prompt",
            "7722acfba750a9403647f6e8d9f9d85e49e5f51ab3fb65403342e05bfa1e4a5d"),
)

RELEASE = PromptRelease(
    method="zipact", repo="Thomas-mci-21/ZipAct", commit="8d57023d48e3b5f8ddf7a77892a22a3ad02e8e9d", literals=LITERALS,
    licence_sha256="e0e9ce74e04b40902c83ef688b0946d0bb99eafcf2bc4487cdfd3e882fa61a78",
)
