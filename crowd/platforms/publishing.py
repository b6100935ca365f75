"""Opening studies to crowds: our own (local, simulated) and the platforms (MTurk,
Prolific), where a publication keeps the platform's ids and remote tasks (HITs, Prolific
studies); closing tasks early and extending them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from crowd.exceptions import NotFound, StudyNotOpen, ValidationError
from crowd.platforms.accounts import ensure_account
from crowd.platforms.providers import PROVIDERS
from crowd.platforms.providers.base import StudyRef
from crowd.settings import Settings
from crowd.storage import (
    AuditEntry,
    Database,
    Experimenter,
    Item,
    ItemKind,
    Publication,
    RemoteTask,
    RemoteTaskStatus,
    Study,
    StudyStatus,
    utcnow,
)
from crowd.studies.lifecycle import get_study
from tasks import get_hit_type

# What marks in a study's audit log that a publish to a platform began (start_publishing).
PUBLISH_STARTED = "publish_started"


def work_slots(session: Session, study: Study) -> int:
    """Answers the study still needs: open places of real items."""
    target = int(study.config.get("annotations_per_item", 1))
    rows = session.execute(
        select(func.coalesce(Item.target, target), Item.holders).where(
            Item.study_id == study.id, Item.kind == ItemKind.REAL
        )
    ).all()
    return sum(max(0, int(want) - int(held)) for want, held in rows)


def study_ref(session: Session, study: Study) -> StudyRef:
    hit = get_hit_type(study.hit_type)
    return StudyRef(
        id=study.id,
        name=study.name,
        hit_type=study.hit_type,
        config=study.config,
        work_slots=work_slots(session, study),
        # What workers see of the study on the platform: its public title, never its name.
        title=hit.public_page(study.config)["title"],
        created_at=study.created_at,
    )


def open_study(session: Session, study: Study, providers: Iterable[str]) -> Study:
    """Open a study to workers of the given providers (e.g. local, sim); `publish` also
    creates what a remote platform needs."""
    names = sorted(set(providers))
    if not names:
        raise ValidationError("name at least one provider to publish to", "providers")
    for name in names:
        PROVIDERS.get(name)  # raises with the list of known providers
    if study.status == StudyStatus.COMPLETED:
        raise StudyNotOpen(f"study {study.id} is closed: create a new study to collect more")
    n_items = session.scalar(
        select(func.count(Item.id)).where(
            Item.study_id == study.id, Item.kind.in_((ItemKind.REAL, ItemKind.GOLD))
        )
    )
    if not n_items:
        raise StudyNotOpen(f"study {study.id} has no items yet: import some first")
    study.providers = sorted(set(study.providers) | set(names))
    if study.status != StudyStatus.PUBLISHED:
        study.status = StudyStatus.PUBLISHED
        study.published_at = utcnow()
    return study


def estimate(
    session: Session,
    study: Study,
    providers: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """What publishing to each provider would cost, with the options checked as publish()
    checks them; nothing is sent or stored."""
    checked = _checked(providers, options)
    ref = study_ref(session, study)
    return {name: PROVIDERS.get(name).estimate(ref, checked[name]) for name in sorted(checked)}


def _checked(
    providers: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    unknown = sorted(set(options or {}) - set(providers))
    if unknown:
        raise ValidationError(f"options given for providers not published to: {unknown}")
    return {
        name: PROVIDERS.get(name).validate_options((options or {}).get(name) or {})
        for name in providers
    }


def set_up_accounts(
    db: Database,
    settings: Settings,
    experimenter_id: int,
    providers: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """What publishing needs of the experimenter's platform accounts (Prolific: their group
    of blocked workers in the study's workspace), per provider that keeps one: set up and
    committed before the publish's transaction (call it outside any), so that a publish that
    fails, and its retries, use it rather than make another. Pass it to publish()."""
    checked = _checked(providers, options)
    return {
        name: ensure_account(db, settings, name, experimenter_id, checked[name])
        for name in sorted(set(providers))
        if PROVIDERS.get(name).keeps_account
    }


def publication_token(session: Session, study_id: int, provider: str) -> str:
    """The request token of the study's next publication to `provider`: the same for the
    same (study, provider, n-th publication), so a publish retried after a lost answer or a
    failed commit finds what the first try created."""
    earlier = session.scalar(
        select(func.count(Publication.id)).where(
            Publication.study_id == study_id, Publication.provider == provider
        )
    )
    return f"crowd-{study_id}-{provider}-{(earlier or 0) + 1}"


def start_publishing(db: Database, study_id: int, providers: Sequence[str]) -> None:
    """Note in the study's audit log that a publish to each platform begins, committed
    before the publish's own transaction (call it outside any): a publish that fails after
    the platform made something (MTurk's HITs) but before our commit leaves its note and no
    publication, so its retry looks for what it made, and a first try does not."""
    with db.session() as session:
        study = session.get(Study, study_id)
        if study is None:
            raise NotFound(f"study {study_id} does not exist")
        owner = session.get(Experimenter, study.experimenter_id)
        actor = f"experimenter:{owner.name}" if owner else "system"
        for name in sorted(set(providers)):
            if not PROVIDERS.get(name).remote:
                continue
            token = publication_token(session, study_id, name)
            details = {"provider": name, "token": token}
            session.add(
                AuditEntry(actor=actor, action=PUBLISH_STARTED, study_id=study_id, details=details)
            )


def publish_study(
    db: Database,
    settings: Settings,
    study_id: int,
    providers: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    experimenter_id: int | None = None,
) -> dict[str, dict[str, str]]:
    """Publish in the steps a retry needs (the API's and the dashboard's): the platform
    accounts and the note that a publish begins are committed first, so that a publish that
    fails and its retry use the same ones and look for what the first try made. With
    `experimenter_id`, only a study of theirs."""

    def owned(session: Session) -> Study:
        owner = session.get(Experimenter, experimenter_id) if experimenter_id is not None else None
        return get_study(session, study_id, owner)

    with db.read_session() as session:
        owner_id = owned(session).experimenter_id
    kept = set_up_accounts(db, settings, owner_id, providers, options)
    start_publishing(db, study_id, providers)
    with db.session() as session:
        return publish(session, settings, owned(session), providers, options, kept)


def _tries(session: Session, study_id: int, token: str) -> int:
    """How many publishes with `token` began (start_publishing noted them)."""
    notes = session.scalars(
        select(AuditEntry.details).where(
            AuditEntry.study_id == study_id, AuditEntry.action == PUBLISH_STARTED
        )
    ).all()
    return sum(1 for details in notes if (details or {}).get("token") == token)


def publish(
    session: Session,
    settings: Settings,
    study: Study,
    providers: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
    accounts: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, str]]:
    """Open the study to each provider's workers; returns the links per provider.

    For a platform, the options are checked before anything is sent, a Publication with
    the platform's ids is kept, and a retried publish sends the same request tokens. Call
    start_publishing() first, outside this transaction: a first try then looks for nothing
    the platform may have made before it.
    `accounts` is what set_up_accounts() gave, for the providers that keep an account.
    """
    checked = _checked(providers, options)
    accounts = accounts or {}
    missing = [n for n in providers if PROVIDERS.get(n).keeps_account and n not in accounts]
    if missing:
        raise ValueError(f"call set_up_accounts() before publishing to {missing}")
    open_study(session, study, providers)
    ref = study_ref(session, study)
    links: dict[str, dict[str, str]] = {}
    for name in sorted(set(providers)):
        provider = PROVIDERS.get(name)
        if not provider.remote:
            links[name] = provider.publish(settings, ref, settings.base_url, {}, "").urls
            continue
        token = publication_token(session, study.id, name)
        # This try's note alone: the first. More: an earlier try may have made tasks on the
        # platform. None (start_publishing was not called): that cannot be told, so it may.
        retried = _tries(session, study.id, token) != 1
        # E.g. Prolific's group of the experimenter's blocked workers, which the study excludes.
        kept = accounts.get(name, {})
        made = provider.publish(
            settings,
            replace(ref, account=kept, retried=retried),
            settings.base_url,
            checked[name],
            token,
        )
        publication = Publication(
            study_id=study.id, provider=name, options=checked[name], remote=made.remote
        )
        session.add(publication)
        session.flush()
        for task in made.tasks:
            session.add(
                RemoteTask(
                    publication_id=publication.id,
                    study_id=study.id,
                    provider=name,
                    remote_id=task.remote_id,
                    places=task.places,
                    expires_at=task.expires_at,
                )
            )
        links[name] = made.urls
    session.flush()
    return links


def remote_tasks(
    session: Session, study: Study, provider: str, task_id: str | None = None
) -> list[RemoteTask]:
    query = select(RemoteTask).where(
        RemoteTask.study_id == study.id, RemoteTask.provider == provider
    )
    if task_id is not None:
        query = query.where(RemoteTask.remote_id == task_id)
    rows = list(session.scalars(query.order_by(RemoteTask.id)).all())
    if not rows:
        raise NotFound(
            f"study {study.id} has no {provider} task{' ' + task_id if task_id else 's'}: "
            f"publish it first (crowd study publish {study.id} --provider {provider})"
        )
    return rows


def expire(
    session: Session, settings: Settings, study: Study, provider_name: str, task_id: str | None
) -> int:
    """Close the study's tasks on the platform to new workers (work in progress goes on)."""
    provider = PROVIDERS.get(provider_name)
    done = 0
    for task in remote_tasks(session, study, provider_name, task_id):
        publication = session.get(Publication, task.publication_id)
        provider.expire(settings, publication.remote if publication else {}, task.remote_id)
        task.status = RemoteTaskStatus.EXPIRED
        task.expires_at = utcnow()
        done += 1
    return done


def extend(
    session: Session,
    settings: Settings,
    study: Study,
    provider_name: str,
    task_id: str | None,
    seconds: int,
    more_places: int,
) -> int:
    """Keep the tasks open longer and/or add places."""
    if seconds < 0 or more_places < 0 or (seconds == 0 and more_places == 0):
        raise ValidationError("give more time (seconds > 0) and/or more places (> 0)")
    provider = PROVIDERS.get(provider_name)
    done = 0
    for task in remote_tasks(session, study, provider_name, task_id):
        publication = session.get(Publication, task.publication_id)
        token = f"crowd-extend-{task.remote_id}-{task.places + more_places}"[:64]
        expires = provider.extend(
            settings,
            publication.remote if publication else {},
            task.remote_id,
            seconds,
            more_places,
            token,
        )
        task.places += more_places
        task.status = RemoteTaskStatus.OPEN
        if expires is not None:
            task.expires_at = expires
        done += 1
    return done
