from tallies.biropa import biropa_tally
from tallies.bulela import bulela_tally
from tallies.buta import buta_tally
from tallies.danake import danake_tally
from tallies.dasi import dasi_tally
from tallies.denese import denese_tally
from tallies.diteke import diteke_tally
from tallies.fadoba import fadoba_tally
from tallies.filebo import filebo_tally
from tallies.fino import fino_tally
from tallies.fupo import fupo_tally
from tallies.futi import futi_tally
from tallies.gabe import gabe_tally
from tallies.galoti import galoti_tally
from tallies.genine import genine_tally
from tallies.gifu import gifu_tally
from tallies.gunona import gunona_tally
from tallies.kenu import kenu_tally
from tallies.kenuge import kenuge_tally
from tallies.kifi import kifi_tally
from tallies.kuzavo import kuzavo_tally
from tallies.lelali import lelali_tally
from tallies.lesulo import lesulo_tally
from tallies.logo import logo_tally
from tallies.logusu import logusu_tally
from tallies.lufu import lufu_tally
from tallies.mami import mami_tally
from tallies.merizo import merizo_tally
from tallies.mibuti import mibuti_tally
from tallies.mileze import mileze_tally
from tallies.movomu import movomu_tally
from tallies.muba import muba_tally
from tallies.nalonu import nalonu_tally
from tallies.naro import naro_tally
from tallies.nedomo import nedomo_tally
from tallies.nizova import nizova_tally
from tallies.nono import nono_tally
from tallies.nurobi import nurobi_tally
from tallies.paseve import paseve_tally
from tallies.pore import pore_tally
from tallies.pula import pula_tally
from tallies.puri import puri_tally
from tallies.rabi import rabi_tally
from tallies.raku import raku_tally
from tallies.rinulo import rinulo_tally
from tallies.rozobu import rozobu_tally
from tallies.rupu import rupu_tally
from tallies.sebubu import sebubu_tally
from tallies.sotove import sotove_tally
from tallies.suta import suta_tally
from tallies.tavo import tavo_tally
from tallies.tesani import tesani_tally
from tallies.tosi import tosi_tally
from tallies.toze import toze_tally
from tallies.tukope import tukope_tally
from tallies.tunude import tunude_tally
from tallies.tupunu import tupunu_tally
from tallies.vanage import vanage_tally
from tallies.vigitu import vigitu_tally
from tallies.volimi import volimi_tally
from tallies.vuni import vuni_tally
from tallies.zita import zita_tally
from tallies.zokezi import zokezi_tally
from tallies.zole import zole_tally


def test_biropa_tally_single():
    assert biropa_tally([5]) == 5


def test_bulela_tally_single():
    assert bulela_tally([6]) == 6


def test_buta_tally_single():
    assert buta_tally([9]) == 9


def test_danake_tally_single():
    assert danake_tally([6]) == 6


def test_dasi_tally_single():
    assert dasi_tally([6]) == 6


def test_denese_tally_single():
    assert denese_tally([2]) == 2


def test_diteke_tally_single():
    assert diteke_tally([1]) == 1


def test_fadoba_tally_single():
    assert fadoba_tally([9]) == 9


def test_filebo_tally_single():
    assert filebo_tally([7]) == 7


def test_fino_tally_single():
    assert fino_tally([1]) == 1


def test_fupo_tally_single():
    assert fupo_tally([8]) == 8


def test_futi_tally_single():
    assert futi_tally([1]) == 1


def test_gabe_tally_single():
    assert gabe_tally([1]) == 1


def test_galoti_tally_single():
    assert galoti_tally([3]) == 3


def test_genine_tally_single():
    assert genine_tally([1]) == 1


def test_gifu_tally_single():
    assert gifu_tally([1]) == 1


def test_gunona_tally_single():
    assert gunona_tally([1]) == 1


def test_kenu_tally_single():
    assert kenu_tally([1]) == 1


def test_kenuge_tally_single():
    assert kenuge_tally([9]) == 9


def test_kifi_tally_single():
    assert kifi_tally([1]) == 1


def test_kuzavo_tally_single():
    assert kuzavo_tally([2]) == 2


def test_lelali_tally_single():
    assert lelali_tally([8]) == 8


def test_lesulo_tally_single():
    assert lesulo_tally([1]) == 1


def test_logo_tally_single():
    assert logo_tally([8]) == 8


def test_logusu_tally_single():
    assert logusu_tally([1]) == 1


def test_lufu_tally_single():
    assert lufu_tally([1]) == 1


def test_mami_tally_single():
    assert mami_tally([8]) == 8


def test_merizo_tally_single():
    assert merizo_tally([3]) == 3


def test_mibuti_tally_single():
    assert mibuti_tally([8]) == 8


def test_mileze_tally_single():
    assert mileze_tally([1]) == 1


def test_movomu_tally_single():
    assert movomu_tally([2]) == 2


def test_muba_tally_single():
    assert muba_tally([5]) == 5


def test_nalonu_tally_single():
    assert nalonu_tally([6]) == 6


def test_naro_tally_single():
    assert naro_tally([6]) == 6


def test_nedomo_tally_single():
    assert nedomo_tally([1]) == 1


def test_nizova_tally_single():
    assert nizova_tally([9]) == 9


def test_nono_tally_single():
    assert nono_tally([1]) == 1


def test_nurobi_tally_single():
    assert nurobi_tally([1]) == 1


def test_paseve_tally_single():
    assert paseve_tally([6]) == 6


def test_pore_tally_single():
    assert pore_tally([9]) == 9


def test_pula_tally_single():
    assert pula_tally([1]) == 1


def test_puri_tally_single():
    assert puri_tally([1]) == 1


def test_rabi_tally_single():
    assert rabi_tally([1]) == 1


def test_raku_tally_single():
    assert raku_tally([1]) == 1


def test_rinulo_tally_single():
    assert rinulo_tally([5]) == 5


def test_rozobu_tally_single():
    assert rozobu_tally([1]) == 1


def test_rupu_tally_single():
    assert rupu_tally([7]) == 7


def test_sebubu_tally_single():
    assert sebubu_tally([1]) == 1


def test_sotove_tally_single():
    assert sotove_tally([1]) == 1


def test_suta_tally_single():
    assert suta_tally([6]) == 6


def test_tavo_tally_single():
    assert tavo_tally([5]) == 5


def test_tesani_tally_single():
    assert tesani_tally([1]) == 1


def test_tosi_tally_single():
    assert tosi_tally([9]) == 9


def test_toze_tally_single():
    assert toze_tally([5]) == 5


def test_tukope_tally_single():
    assert tukope_tally([6]) == 6


def test_tunude_tally_single():
    assert tunude_tally([1]) == 1


def test_tupunu_tally_single():
    assert tupunu_tally([8]) == 8


def test_vanage_tally_single():
    assert vanage_tally([7]) == 7


def test_vigitu_tally_single():
    assert vigitu_tally([5]) == 5


def test_volimi_tally_single():
    assert volimi_tally([1]) == 1


def test_vuni_tally_single():
    assert vuni_tally([2]) == 2


def test_zita_tally_single():
    assert zita_tally([1]) == 1


def test_zokezi_tally_single():
    assert zokezi_tally([3]) == 3


def test_zole_tally_single():
    assert zole_tally([7]) == 7
