"""The MTurk stand-in's operations (op_<Operation>), one method per MTurk API call."""

from __future__ import annotations

import random
import time
from decimal import Decimal
from typing import Any

from tests.crowd.platforms.providers.mturk_state import (
    ID_CHARS,
    MAX_AUTO_APPROVAL,
    TOKEN_TTL,
    Assignment,
    Hit,
    HitType,
    Payment,
    RequestError,
    _amount,
    _assignment_view,
    _bonus_view,
    _check_external_question,
    _check_qualifications,
    _fee,
    _feedback,
    _page,
    _range,
)


class MTurkOperations:
    """What MTurkServer does for each MTurk call, on the state that MTurkServer keeps."""

    balance: Decimal
    hit_id_in_duplicate: bool
    rng: random.Random
    hit_types: dict[str, HitType]
    hits: dict[str, Hit]
    assignments: dict[str, Assignment]
    payments: list[Payment]
    blocks: dict[str, str]
    notifications: list[tuple[list[str], str, str]]
    qualifications: dict[tuple[str, str], int]
    expirations: dict[str, float]
    # (operation, token) -> (what it made, when, the request's id)
    tokens: dict[tuple[str, str], tuple[str, float, str]]
    # Seconds added to the clock: pass_time() lets a test wait out the 24 hours of a token.
    skew: float
    # The id of the request being handled (MTurk's x-amzn-RequestId).
    request_id: str

    def now(self) -> float:
        return time.time() + self.skew

    def _new_id(self) -> str:
        return "3" + "".join(self.rng.choice(ID_CHARS) for _ in range(29))

    def _hit(self, hit_id: str) -> Hit:
        hit = self.hits.get(hit_id)
        if hit is None:
            raise RequestError(
                f"Hit {hit_id} does not exist.", "AWS.MechanicalTurk.HITDoesNotExist"
            )
        return hit

    def _assignment(self, assignment_id: str) -> Assignment:
        assignment = self.assignments.get(assignment_id)
        if assignment is None:
            raise RequestError(
                f"Assignment {assignment_id} does not exist.",
                "AWS.MechanicalTurk.AssignmentDoesNotExist",
            )
        return assignment

    def _pay(self, payment: Payment) -> None:
        total = payment.amount + payment.fee
        if total > self.balance:
            raise RequestError(
                "You do not have enough funds to complete this request.",
                "AWS.MechanicalTurk.InsufficientFunds",
            )
        self.balance -= total
        self.payments.append(payment)

    def _seen(self, operation: str, token: str | None) -> tuple[str, str] | None:
        """What an earlier request with `token` made and that request's id, for 24 hours."""
        earlier = self.tokens.get((operation, token)) if token else None
        if earlier is None or self.now() - earlier[1] > TOKEN_TTL:
            return None
        return earlier[0], earlier[2]

    def _remember(self, operation: str, token: str | None, made: str) -> None:
        if token:
            self.tokens[(operation, token)] = (made, self.now(), self.request_id)

    # -- operations ------------------------------------------------------------------------

    def op_GetAccountBalance(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"AvailableBalance": str(self.balance.quantize(Decimal("0.01")))}

    def op_CreateHITType(self, body: dict[str, Any]) -> dict[str, Any]:
        reward = _amount(body["Reward"], "Reward")
        if not body["Title"].strip() or len(body["Title"]) > 128:
            raise RequestError("Title must be 1 to 128 characters.")
        if not body["Description"].strip() or len(body["Description"]) > 2000:
            raise RequestError("Description must be 1 to 2000 characters.")
        if len(body.get("Keywords", "")) > 1000:
            raise RequestError("Keywords must be at most 1000 characters.")
        duration = _range(body["AssignmentDurationInSeconds"], "AssignmentDurationInSeconds")
        delay = body.get("AutoApprovalDelayInSeconds", MAX_AUTO_APPROVAL)
        _range(delay, "AutoApprovalDelayInSeconds", 0, MAX_AUTO_APPROVAL)
        qualifications = body.get("QualificationRequirements", [])
        _check_qualifications(qualifications)
        # MTurk answers the existing HIT type's id when every property is the same.
        for hit_type in self.hit_types.values():
            if (
                hit_type.title,
                hit_type.description,
                hit_type.reward,
                hit_type.duration,
                hit_type.auto_approval_delay,
                hit_type.keywords,
                hit_type.qualifications,
            ) == (
                body["Title"],
                body["Description"],
                reward,
                duration,
                delay,
                body.get("Keywords", ""),
                qualifications,
            ):
                return {"HITTypeId": hit_type.id}
        hit_type = HitType(
            id=self._new_id(),
            title=body["Title"],
            description=body["Description"],
            reward=reward,
            duration=duration,
            auto_approval_delay=delay,
            keywords=body.get("Keywords", ""),
            qualifications=qualifications,
        )
        self.hit_types[hit_type.id] = hit_type
        return {"HITTypeId": hit_type.id}

    def op_CreateHITWithHITType(self, body: dict[str, Any]) -> dict[str, Any]:
        hit_type = self.hit_types.get(body["HITTypeId"])
        if hit_type is None:
            raise RequestError(
                f"HITType {body['HITTypeId']} does not exist.",
                "AWS.MechanicalTurk.HITTypeDoesNotExist",
            )
        token = body.get("UniqueRequestToken")
        # CreateHIT and CreateHITWithHITType make HITs alike: one token, one HIT.
        earlier = self._seen("CreateHIT", token)
        if earlier is not None:
            named = f" The HIT is {earlier[0]}." if self.hit_id_in_duplicate else ""
            raise RequestError(
                f'The idempotency token "{token}" has already been processed.{named}',
                "AWS.MechanicalTurk.HitAlreadyExists",
            )
        lifetime = _range(body["LifetimeInSeconds"], "LifetimeInSeconds")
        max_assignments = _range(body.get("MaxAssignments", 1), "MaxAssignments", 1, 1_000_000)
        if "HITLayoutId" in body or "Question" not in body:
            raise RequestError("The test server takes HITs with a Question (ExternalQuestion).")
        url = _check_external_question(body["Question"])
        hit = Hit(
            id=self._new_id(),
            hit_type=hit_type,
            group_id=hit_type.id,
            question=body["Question"],
            url=url,
            lifetime=lifetime,
            max_assignments=max_assignments,
            annotation=body.get("RequesterAnnotation"),
            created=self.now(),
        )
        self.hits[hit.id] = hit
        self._remember("CreateHIT", token, hit.id)
        return {"HIT": self._hit_view(hit)}

    def op_CreateHIT(self, body: dict[str, Any]) -> dict[str, Any]:
        """CreateHIT: the HIT type's properties and the HIT's in one call."""
        type_fields = (
            "Title", "Description", "Reward", "AssignmentDurationInSeconds", "Keywords",
            "AutoApprovalDelayInSeconds", "QualificationRequirements",
        )  # fmt: skip
        hit_type = self.op_CreateHITType({k: body[k] for k in type_fields if k in body})
        rest = {k: v for k, v in body.items() if k not in type_fields}
        return self.op_CreateHITWithHITType({**rest, "HITTypeId": hit_type["HITTypeId"]})

    def _hit_view(self, hit: Hit) -> dict[str, Any]:
        hit_type = hit.hit_type
        done = [a for a in self.assignments.values() if a.hit_id == hit.id]
        expires = self.expirations.get(hit.id, hit.created + hit.lifetime)
        submitted = [a for a in done if a.status != "Accepted"]
        # As MTurk documents: Assignable, Unassignable once every assignment is taken,
        # Reviewable once all are submitted or the HIT has expired.
        if len(submitted) >= hit.max_assignments or self.now() > expires:
            status = "Reviewable"
        elif len(done) >= hit.max_assignments:
            status = "Unassignable"
        else:
            status = "Assignable"
        view: dict[str, Any] = {
            "HITId": hit.id,
            "HITTypeId": hit_type.id,
            "HITGroupId": hit.group_id,
            "CreationTime": hit.created,
            "Title": hit_type.title,
            "Description": hit_type.description,
            "Question": hit.question,
            "Keywords": hit_type.keywords,
            "HITStatus": status,
            "MaxAssignments": hit.max_assignments,
            "Reward": str(hit_type.reward.quantize(Decimal("0.01"))),
            "AutoApprovalDelayInSeconds": hit_type.auto_approval_delay,
            "Expiration": expires,
            "AssignmentDurationInSeconds": hit_type.duration,
            "QualificationRequirements": hit_type.qualifications,
            "HITReviewStatus": "NotReviewed",
            "NumberOfAssignmentsPending": 0,
            "NumberOfAssignmentsAvailable": hit.max_assignments - len(done),
            "NumberOfAssignmentsCompleted": sum(1 for a in done if a.status != "Submitted"),
        }
        if hit.annotation is not None:
            view["RequesterAnnotation"] = hit.annotation
        return view

    def op_GetHIT(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"HIT": self._hit_view(self._hit(body["HITId"]))}

    def op_ListHITs(self, body: dict[str, Any]) -> dict[str, Any]:
        hits = sorted(self.hits.values(), key=lambda h: h.created)
        page, next_token = _page(hits, body, "hits")
        return {
            "HITs": [self._hit_view(h) for h in page],
            "NumResults": len(page),
            **next_token,
        }

    def op_ListAssignmentsForHIT(self, body: dict[str, Any]) -> dict[str, Any]:
        hit = self._hit(body["HITId"])
        statuses = body.get("AssignmentStatuses") or ["Submitted", "Approved", "Rejected"]
        found = [
            a for a in self.assignments.values() if a.hit_id == hit.id and a.status in statuses
        ]
        page, next_token = _page(found, body, hit.id)
        return {
            "Assignments": [_assignment_view(a) for a in page],
            "NumResults": len(page),
            **next_token,
        }

    def op_ApproveAssignment(self, body: dict[str, Any]) -> dict[str, Any]:
        assignment = self._assignment(body["AssignmentId"])
        override = body.get("OverrideRejection", False)
        if not (assignment.status == "Submitted" or (assignment.status == "Rejected" and override)):
            raise RequestError(
                f"This operation can be called with a status of: Submitted "
                f"(assignment {assignment.id} is {assignment.status}).",
                "AWS.MechanicalTurk.InvalidAssignmentState",
            )
        _feedback(body.get("RequesterFeedback"), required=False)
        hit = self.hits[assignment.hit_id]
        reward = hit.hit_type.reward
        self._pay(
            Payment(
                "reward",
                assignment.worker_id,
                assignment.id,
                reward,
                _fee(reward, hit.max_assignments),
            )
        )
        assignment.status = "Approved"
        assignment.approved = self.now()
        assignment.feedback = body.get("RequesterFeedback")
        return {}

    def op_RejectAssignment(self, body: dict[str, Any]) -> dict[str, Any]:
        assignment = self._assignment(body["AssignmentId"])
        if assignment.status != "Submitted":
            raise RequestError(
                f"This operation can be called with a status of: Submitted "
                f"(assignment {assignment.id} is {assignment.status}).",
                "AWS.MechanicalTurk.InvalidAssignmentState",
            )
        assignment.feedback = _feedback(body["RequesterFeedback"], required=True)
        assignment.status = "Rejected"
        assignment.rejected = self.now()
        return {}

    def op_SendBonus(self, body: dict[str, Any]) -> dict[str, Any]:
        token = body.get("UniqueRequestToken")
        earlier = self._seen("SendBonus", token)
        if earlier is not None:
            # Documented: "an error with a message containing the request ID".
            raise RequestError(
                f'The idempotency token "{token}" has already been processed by request '
                f"{earlier[1]}.",
                "AWS.MechanicalTurk.DuplicateRequest",
            )
        assignment = self._assignment(body["AssignmentId"])
        if assignment.worker_id != body["WorkerId"]:
            raise RequestError(
                f"Assignment {assignment.id} was not done by worker {body['WorkerId']}.",
                "AWS.MechanicalTurk.InvalidParameterValue",
            )
        amount = _amount(body["BonusAmount"], "BonusAmount")
        if not body["Reason"].strip():
            raise RequestError("Reason must not be empty: the worker sees it.")
        self._pay(
            Payment(
                "bonus",
                body["WorkerId"],
                assignment.id,
                amount,
                _fee(amount, 1),
                body["Reason"],
                self.now(),
            )
        )
        self._remember("SendBonus", token, assignment.id)
        return {}

    def op_ListBonusPayments(self, body: dict[str, Any]) -> dict[str, Any]:
        """The bonuses paid for one HIT or one assignment (exactly one of the two is given)."""
        if ("HITId" in body) == ("AssignmentId" in body):
            raise RequestError("Either the HITId parameter or the AssignmentId parameter must "
                               "be specified.")  # fmt: skip
        if "HITId" in body:
            hit = self._hit(body["HITId"])
            scope = hit.id
            wanted = {a.id for a in self.assignments.values() if a.hit_id == hit.id}
        else:
            scope = self._assignment(body["AssignmentId"]).id
            wanted = {scope}
        paid = [p for p in self.payments if p.kind == "bonus" and p.assignment_id in wanted]
        page, next_token = _page(paid, body, f"bonuses-{scope}")
        return {"BonusPayments": [_bonus_view(p) for p in page], "NumResults": len(page),
                **next_token}  # fmt: skip

    def op_GetAssignment(self, body: dict[str, Any]) -> dict[str, Any]:
        assignment = self._assignment(body["AssignmentId"])
        if assignment.status == "Accepted":
            raise RequestError(
                f"Assignment {assignment.id} is not submitted yet.",
                "AWS.MechanicalTurk.AssignmentDoesNotExist",
            )
        return {
            "Assignment": _assignment_view(assignment),
            "HIT": self._hit_view(self.hits[assignment.hit_id]),
        }

    def op_UpdateExpirationForHIT(self, body: dict[str, Any]) -> dict[str, Any]:
        hit = self._hit(body["HITId"])
        when = body["ExpireAt"]
        self.expirations[hit.id] = float(when)
        return {}

    def op_CreateAdditionalAssignmentsForHIT(self, body: dict[str, Any]) -> dict[str, Any]:
        hit = self._hit(body["HITId"])
        token = body.get("UniqueRequestToken")
        earlier = self._seen("CreateAdditionalAssignmentsForHIT", token)
        if earlier is not None:
            raise RequestError(
                f'The idempotency token "{token}" has already been processed by request '
                f"{earlier[1]}.",
                "AWS.MechanicalTurk.DuplicateRequest",
            )
        more = body["NumberOfAdditionalAssignments"]
        if not 1 <= more <= 1_000_000:
            raise RequestError("NumberOfAdditionalAssignments must be 1 or more.")
        hit.max_assignments += more
        self._remember("CreateAdditionalAssignmentsForHIT", token, hit.id)
        return {}

    def op_AssociateQualificationWithWorker(self, body: dict[str, Any]) -> dict[str, Any]:
        self.qualifications[(body["WorkerId"], body["QualificationTypeId"])] = int(
            body.get("IntegerValue", 1)
        )
        return {}

    def op_DisassociateQualificationFromWorker(self, body: dict[str, Any]) -> dict[str, Any]:
        self.qualifications.pop((body["WorkerId"], body["QualificationTypeId"]), None)
        return {}

    def op_CreateWorkerBlock(self, body: dict[str, Any]) -> dict[str, Any]:
        if not body["Reason"].strip():
            raise RequestError("Reason must not be empty.")
        self.blocks[body["WorkerId"]] = body["Reason"]
        return {}

    def op_DeleteWorkerBlock(self, body: dict[str, Any]) -> dict[str, Any]:
        # Documented: unblocking a worker who is not blocked succeeds.
        self.blocks.pop(body["WorkerId"], None)
        return {}

    def op_NotifyWorkers(self, body: dict[str, Any]) -> dict[str, Any]:
        subject, text, workers = body["Subject"], body["MessageText"], body["WorkerIds"]
        if not subject.strip() or len(subject) > 200:
            raise RequestError("Subject must be 1 to 200 characters.")
        if not text.strip() or len(text) > 4096:
            raise RequestError("MessageText must be 1 to 4096 characters.")
        if not 1 <= len(workers) <= 100:
            raise RequestError(f"WorkerIds holds {len(workers)} ids; give 1 to 100 per call.")
        # MTurk only e-mails workers who have worked for this requester.
        known = {a.worker_id for a in self.assignments.values()}
        failures = [
            {
                "NotifyWorkersFailureCode": "HardFailure",
                "NotifyWorkersFailureMessage": "Cannot send notification to a worker who has "
                "not done work for you.",
                "WorkerId": worker,
            }
            for worker in workers
            if worker not in known
        ]
        sent = [worker for worker in workers if worker in known]
        self.notifications.append((sent, subject, text))
        return {"NotifyWorkersFailureStatuses": failures}
