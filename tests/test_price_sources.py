"""Price sources against local servers on loopback: AWS (EC2 + Pricing APIs),
Azure (Retail Prices API), and a SkyPilot vms.csv; each ends in a recommendation
that names its region and zone."""

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from deepvm.catalog import load_catalog as _load_catalog
from deepvm.catalog._aws import network_gbps, quota_group
from deepvm.catalog._azure import classify
from deepvm.cli import main
from tests.helpers import whole

# Prices in the shipped snapshot: every on-demand price and every spot price.
SHIPPED_PRICE_ROWS = len(_load_catalog().instances) + int(
    _load_catalog().instances["spot_price"].notna().sum()
)


class Handler(BaseHTTPRequestHandler):
    routes: ClassVar[dict] = {}
    seen: ClassVar[list] = []

    def log_message(self, *args):
        pass

    def _serve(self, body: bytes):
        self.seen.append((self.command, self.path, self.headers.get("X-Amz-Target"), body))
        code, ctype, payload = type(self).respond(self, body)
        data = payload.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._serve(b"")

    def do_POST(self):
        self._serve(self.rfile.read(int(self.headers.get("Content-Length", 0))))


def serve(respond):
    handler = type("H", (Handler,), {"respond": staticmethod(respond), "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler, f"http://127.0.0.1:{server.server_address[1]}"


def stop(server):
    server.shutdown()
    server.server_close()


# --- Azure ---------------------------------------------------------------------------


def azure_item(
    sku,
    price,
    meter,
    product="Virtual Machines NCasT4_v3 Series",
    kind="Consumption",
    region="eastus",
):
    return {
        "currencyCode": "USD",
        "retailPrice": price,
        "unitPrice": price,
        "armRegionName": region,
        "location": "US East",
        "armSkuName": sku,
        "meterName": meter,
        "skuName": meter,
        "productName": product,
        "type": kind,
        "serviceName": "Virtual Machines",
        "unitOfMeasure": "1 Hour",
    }


AZURE_PAGES = [
    [
        azure_item("Standard_NC4as_T4_v3", 0.526, "NC4as T4 v3"),
        azure_item("Standard_NC4as_T4_v3", 0.158, "NC4as T4 v3 Spot"),
        azure_item(
            "Standard_NC4as_T4_v3", 0.8, "NC4as T4 v3", "Virtual Machines NCasT4_v3 Series Windows"
        ),
        azure_item("Standard_NC4as_T4_v3", 0.1, "NC4as T4 v3 Low Priority"),
    ],
    [
        azure_item("Standard_NC4as_T4_v3", 3000.0, "NC4as T4 v3", kind="Reservation"),
        azure_item("Standard_D4s_v5", 0.192, "D4s v5", "Virtual Machines Dsv5 Series"),
        azure_item("Standard_D4s_v5", 0.0, "D4s v5 Spot", "Virtual Machines Dsv5 Series"),
    ],
    [
        azure_item("Standard_E4s_v5", 0.252, "E4s v5", "Virtual Machines Esv5 Series"),
        azure_item("Standard_NC8as_T4_v3", 0.752, "NC8as T4 v3"),
        azure_item("Standard_NC8as_T4_v3", 0.226, "NC8as T4 v3 Spot"),
    ],
]


@pytest.fixture
def azure(monkeypatch):
    base = {}

    def respond(handler, body):
        query = urllib.parse.parse_qs(urllib.parse.urlparse(handler.path).query)
        page = int(query.get("page", ["0"])[0])
        assert "armRegionName eq 'eastus'" in query["$filter"][0]
        nxt = (
            f"{base['url']}/api/retail/prices?{urllib.parse.urlencode({**{k: v[0] for k, v in query.items()}, 'page': page + 1})}"  # noqa: E501
            if page + 1 < len(AZURE_PAGES)
            else None
        )
        return (
            200,
            "application/json",
            json.dumps(
                {
                    "BillingCurrency": "USD",
                    "CustomerEntityId": "Default",
                    "Items": AZURE_PAGES[page],
                    "NextPageLink": nxt,
                    "Count": len(AZURE_PAGES[page]),
                }
            ),
        )

    server, handler, url = serve(respond)
    base["url"] = url
    monkeypatch.setenv("DEEPVM_AZURE_PRICES_URL", f"{url}/api/retail/prices")
    yield handler
    stop(server)


def test_azure_classification():
    assert classify(azure_item("x", 1, "NC4as T4 v3 Spot")) == "spot"
    assert classify(azure_item("x", 1, "NC4as T4 v3")) == "on_demand"
    assert classify(azure_item("x", 1, "A Low Priority")) is None
    assert classify(azure_item("x", 1, "A", kind="Reservation")) is None
    assert classify(azure_item("x", 1, "A", product="Virtual Machines A Windows")) is None


def test_azure_pages_to_store_to_recommendation(azure, tmp_path, capsys):
    store = str(tmp_path)
    assert (
        main(
            [
                "prices",
                "refresh",
                "--source",
                "azure",
                "--regions",
                "eastus",
                "--store",
                store,
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert len(azure.seen) == 3  # followed every NextPageLink
    assert out["rows"] == 6 and out["dropped"] == 1 and not out["stale"]
    prices = whole(store, "prices").df()
    t4 = prices[prices["instance_type"] == "Standard_NC4as_T4_v3"].set_index("market")
    assert t4.loc["on_demand", "usd_per_hour"] == 0.526 and t4.loc["spot", "usd_per_hour"] == 0.158
    # the other clouds keep the shipped snapshot's rows (a source of one cloud)
    assert out["carried"].startswith("aws, gcp kept from the shipped snapshot")
    argv = ["recommend", "--budget", "2", "--store", store, "--json", "--top", "1"]
    assert main([*argv, "--cloud", "azure"]) == 0
    rec = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert rec["region"] == "eastus" and rec["worker_type"].startswith("Standard_NC")
    assert "zone" in rec  # Azure retail prices are regional: no zone to name


# --- AWS -----------------------------------------------------------------------------

EC2_NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
TYPES = [  # (type, vcpus, MiB, network, gpu name, count, gpu MiB)
    ("g4dn.xlarge", 4, 16384, "Up to 25 Gigabit", "T4", 1, 16384),
    ("g5.xlarge", 4, 16384, "Up to 10 Gigabit", "A10G", 1, 24576),
    ("c5.xlarge", 4, 8192, "Up to 10 Gigabit", None, 0, 0),
    ("m6i.xlarge", 4, 16384, "Up to 12.5 Gigabit", None, 0, 0),
]
SPOT = [
    ("g4dn.xlarge", "us-east-1a", "0.2100"),
    ("g4dn.xlarge", "us-east-1b", "0.1650"),
    ("g5.xlarge", "us-east-1c", "0.3100"),
    ("c5.xlarge", "us-east-1a", "0.0700"),
]
ON_DEMAND = {
    "g4dn.xlarge": "0.5260000000",
    "g5.xlarge": "1.0060000000",
    "c5.xlarge": "0.1700000000",
    "m6i.xlarge": "0.1920000000",
}


def type_xml(t):
    name, vcpus, mib, net, gpu, count, gmib = t
    gpus = (
        (
            f"<gpuInfo><gpus><item><name>{gpu}</name><manufacturer>NVIDIA</manufacturer>"
            f"<count>{count}</count><memoryInfo><sizeInMiB>{gmib}</sizeInMiB></memoryInfo>"
            "</item></gpus></gpuInfo>"
        )
        if gpu
        else ""
    )
    return (
        f"<item><instanceType>{name}</instanceType><vCpuInfo><defaultVCpus>{vcpus}"
        f"</defaultVCpus></vCpuInfo><memoryInfo><sizeInMiB>{mib}</sizeInMiB></memoryInfo>"
        f"<networkInfo><networkPerformance>{net}</networkPerformance></networkInfo>{gpus}"
        "</item>"
    )


def product(itype, price):
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {
                    "instanceType": itype,
                    "regionCode": "us-east-1",
                    "operatingSystem": "Linux",
                    "tenancy": "Shared",
                    "preInstalledSw": "NA",
                    "capacitystatus": "Used",
                },
            },
            "terms": {
                "OnDemand": {
                    "T1": {
                        "priceDimensions": {"D1": {"unit": "Hrs", "pricePerUnit": {"USD": price}}}
                    }
                }
            },
        }
    )


def aws_respond(handler, body):
    target = handler.headers.get("X-Amz-Target")
    if target == "AWSPriceListService.GetProducts":
        req = json.loads(body)
        assert {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"} in req[
            "Filters"
        ]
        items = list(ON_DEMAND.items())
        half = len(items) // 2
        page, nxt = (items[half:], None) if req.get("NextToken") == "p2" else (items[:half], "p2")
        return (
            200,
            "application/x-amz-json-1.1",
            json.dumps(
                {
                    "FormatVersion": "aws_v1",
                    "PriceList": [product(t, p) for t, p in page],
                    **({"NextToken": nxt} if nxt else {}),
                }
            ),
        )
    form = urllib.parse.parse_qs(body.decode())
    action, token = form["Action"][0], form.get("NextToken", [None])[0]
    if action == "DescribeInstanceTypes":
        page, nxt = (TYPES[2:], None) if token == "t2" else (TYPES[:2], "t2")
        items = "".join(type_xml(t) for t in page)
        return (
            200,
            "text/xml",
            (
                f'<DescribeInstanceTypesResponse xmlns="{EC2_NS}"><requestId>r</requestId>'
                f"<instanceTypeSet>{items}</instanceTypeSet>"
                + (f"<nextToken>{nxt}</nextToken>" if nxt else "")
                + "</DescribeInstanceTypesResponse>"
            ),
        )
    if action == "DescribeSpotPriceHistory":
        assert form["ProductDescription.1"] == ["Linux/UNIX"]
        page, nxt = (SPOT[2:], None) if token == "s2" else (SPOT[:2], "s2")
        items = "".join(
            f"<item><instanceType>{t}</instanceType><productDescription>Linux/UNIX"
            f"</productDescription><spotPrice>{p}</spotPrice><timestamp>"
            f"2026-12-02T10:00:00.000Z</timestamp><availabilityZone>{z}</availabilityZone>"
            "</item>"
            for t, z, p in page
        )
        return (
            200,
            "text/xml",
            (
                f'<DescribeSpotPriceHistoryResponse xmlns="{EC2_NS}"><requestId>r</requestId>'
                f"<spotPriceHistorySet>{items}</spotPriceHistorySet>"
                + (f"<nextToken>{nxt}</nextToken>" if nxt else "")
                + "</DescribeSpotPriceHistoryResponse>"
            ),
        )
    return (
        400,
        "text/xml",
        "<Response><Errors><Error><Code>InvalidAction</Code></Error></Errors></Response>",
    )


@pytest.fixture
def aws(monkeypatch):
    pytest.importorskip("boto3")
    server, handler, url = serve(aws_respond)
    for key, value in {
        "AWS_ENDPOINT_URL_EC2": url,
        "AWS_ENDPOINT_URL_PRICING": url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
    }.items():
        monkeypatch.setenv(key, value)
    yield handler
    stop(server)


def test_network_and_quota_parsing():
    assert network_gbps("Up to 25 Gigabit") == 25 and network_gbps("4x 100 Gigabit") == 400
    assert network_gbps("Moderate") == 1.0
    assert (quota_group("g5.xlarge"), quota_group("p4d.24xlarge"), quota_group("c5.xlarge")) == (
        "G",
        "P",
        "standard",
    )


def test_aws_paginated_to_store_to_recommendation(aws, tmp_path, capsys):
    store = str(tmp_path)
    assert (
        main(
            [
                "prices",
                "refresh",
                "--source",
                "aws",
                "--regions",
                "us-east-1",
                "--store",
                store,
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["rows"] == len(SPOT) + len(ON_DEMAND) and out["dropped"] == 0
    targets = [s[2] for s in aws.seen]
    assert targets.count("AWSPriceListService.GetProducts") == 2  # both pages
    assert sum(b"DescribeInstanceTypes" in s[3] for s in aws.seen) == 2
    assert sum(b"DescribeSpotPriceHistory" in s[3] for s in aws.seen) == 2
    inst = whole(store, "instances").df().set_index("instance_type")
    assert inst.loc["g4dn.xlarge", "network_gbps"] == 25
    assert inst.loc["g5.xlarge", "accelerator_name"] == "A10G"
    assert inst.loc["g5.xlarge", "peak_flops"] == 7.0e13
    assert main(["recommend", "--budget", "3", "--store", store, "--json", "--top", "1"]) == 0
    rec = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert rec["region"] == "us-east-1"
    if rec["worker_type"] == "g4dn.xlarge" and rec["n_spot"]:
        assert rec["zone"] == "us-east-1b"  # the cheaper zone


def test_aws_failure_keeps_the_store(aws, tmp_path, monkeypatch, capsys):
    store = str(tmp_path)
    assert main(["prices", "refresh", "--store", store, "--date", "2026-12-01"]) == 0
    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", "http://127.0.0.1:9")  # refused
    monkeypatch.setattr("deepvm.nightly.prices.DEFAULT_BACKOFF_S", 0.01)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    code = main(["prices", "refresh", "--source", "aws", "--store", store, "--date", "2026-12-02"])
    assert code == 1 and "FAILED" in capsys.readouterr().out
    rows = whole(store, "prices").df()
    old = rows[rows["snapshot_date"].astype(str) == "2026-12-01"]
    assert len(old) == SHIPPED_PRICE_ROWS and not old["stale"].any()
    assert rows[rows["snapshot_date"].astype(str) == "2026-12-02"]["stale"].all()


# --- SkyPilot ------------------------------------------------------------------------

VMS = (Path(__file__).parent / "data" / "skypilot-vms.csv").read_text()


def test_skypilot_csv_to_store_to_recommendation(tmp_path, capsys):
    vms = tmp_path / "vms.csv"
    vms.write_text(VMS)
    store = str(tmp_path / "store")
    assert (
        main(
            [
                "prices",
                "refresh",
                "--source",
                "skypilot",
                "--skypilot-csv",
                str(vms),
                "--store",
                store,
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["rows"] == 8 and out["dropped"] == 2  # g5 has no spot price, m6i's is 0
    assert (
        main(
            [
                "recommend",
                "--budget",
                "2",
                "--store",
                store,
                "--json",
                "--top",
                "1",
                "--policy",
                "cost_first",
                "--cloud",
                "aws",
            ]
        )
        == 0
    )
    rec = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert rec["worker_type"] == "g4dn.xlarge" and rec["region"] == "us-east-1"
    assert rec["zone"] == "use1-az4"  # the cheaper spot zone, as a zone ID


def test_skypilot_missing_column(tmp_path, capsys):
    vms = tmp_path / "vms.csv"
    vms.write_text("InstanceType,Price\ng4dn.xlarge,0.5\n")
    assert (
        main(
            [
                "prices",
                "refresh",
                "--source",
                "skypilot",
                "--skypilot-csv",
                str(vms),
                "--store",
                str(tmp_path / "s"),
            ]
        )
        == 2
    )
    assert "lacks column(s)" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def test_snapshot_source_recommendation_names_region(tmp_path, capsys):
    store = str(tmp_path)
    assert main(["prices", "refresh", "--store", store]) == 0
    capsys.readouterr()
    assert main(["recommend", "--budget", "3", "--store", store, "--json", "--top", "1"]) == 0
    rec = json.loads(capsys.readouterr().out)["recommendations"][0]
    # the snapshot's spot prices are its regions' cheapest zones, which the answer names
    assert rec["n_spot"] > 0 and rec["zone"].startswith(
        {"us-east-1": "use1", "us-west-2": "usw2", "eu-west-1": "euw1"}[rec["region"]]
    )


# --- GCP -----------------------------------------------------------------------------

# SkyPilot's gcp/vms.csv layout: host rows (InstanceType) and GPU rows (accelerator).
GCP_CSV = (
    "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,"
    "AvailabilityZone,Price,SpotPrice\n"
    "g2-standard-4,4.0,16.0,,,,us-central1,us-central1-a,0.15,0.06\n"
    "g2-standard-4,4.0,16.0,,,,us-central1,us-central1-b,0.15,0.05\n"
    ",,,L4,1,L4,us-central1,us-central1-a,0.56,0.22\n"
    ",,,L4,1,L4,us-central1,us-central1-b,0.56,0.20\n"
    "a2-ultragpu-1g,12.0,170.0,,,,us-central1,us-central1-a,1.10,0.55\n"
    ",,,A100-80GB,1,A100-80GB,us-central1,us-central1-a,4.0,9.0\n"  # spot above on-demand
    "n1-standard-4,4.0,15.0,,,,us-central1,us-central1-a,0.19,0.05\n"
    "n1-standard-8,8.0,30.0,,,,us-central1,us-central1-a,0.38,0.10\n"
    ",,,T4,1,T4,us-central1,us-central1-a,0.35,0.175\n"
    "n1-standard-8,8.0,30.0,,,,asia-east1,asia-east1-a,0.44,0.07\n"  # not a planned region
)


@pytest.fixture
def gcp(monkeypatch):
    def respond(handler, body):
        return 200, "text/csv", GCP_CSV

    server, handler, url = serve(respond)
    monkeypatch.setenv("DEEPVM_GCP_PRICES_URL", f"{url}/catalogs/v8/gcp/vms.csv")
    yield handler
    stop(server)


def test_gcp_hosts_plus_gpus_per_zone_to_store_to_recommendation(gcp, tmp_path, capsys):
    store = str(tmp_path)
    argv = ["prices", "refresh", "--source", "gcp", "--store", store, "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(gcp.seen) == 1
    # L4 x1 in 2 zones x 2 markets, A100-80GB on demand, T4 x1 (n1-standard-8) 2 markets,
    # n1-standard-4 2 markets; the A100-80GB spot (the source's defect) is dropped.
    assert out["rows"] == 4 + 1 + 2 + 2 and out["dropped"] == 1
    prices = whole(store, "prices").df().set_index(["instance_type", "zone", "market"])
    price = prices["usd_per_hour"]
    assert price["g2-standard-4", "us-central1-b", "spot"] == pytest.approx(0.05 + 0.20)
    assert price["n1-standard-8+1xT4", "us-central1-a", "on_demand"] == pytest.approx(0.73)
    assert price["n1-standard-4", "us-central1-a", "on_demand"] == pytest.approx(0.19)
    argv = ["recommend", "--budget", "2", "--store", store, "--json", "--top", "1"]
    assert main([*argv, "--cloud", "gcp"]) == 0
    rec = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert rec["cloud"] == "gcp" and rec["region"] == "us-central1" and rec["zone"]


def test_gcp_source_failure_is_one_line_and_keeps_the_store(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("DEEPVM_GCP_PRICES_URL", str(tmp_path / "missing.csv"))
    argv = ["prices", "refresh", "--source", "gcp", "--store", str(tmp_path / "s"), "-q"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.csv" in err[0]
