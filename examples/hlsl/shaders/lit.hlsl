// A physically inspired lit surface with a shadow-caster pass: three entry points in one
// file, keyword blocks in the style of Unity's multi_compile.
#include "include/common.hlsli"
#include "include/fog.hlsli"

Texture2D _BaseMap : register(t0);
SamplerState sampler_BaseMap : register(s0);
#if defined(_NORMALMAP)
Texture2D _BumpMap : register(t1);
#endif
#if defined(_EMISSION)
Texture2D _EmissionMap : register(t2);
#endif
#if defined(_SHADOWS_SOFT)
Texture2D _ShadowMap : register(t3);
SamplerComparisonState sampler_ShadowMap : register(s1);
#endif

struct Attributes
{
    float3 positionOS : POSITION;
    float3 normalOS : NORMAL;
    float4 tangentOS : TANGENT;
    float2 uv : TEXCOORD0;
};

struct Varyings
{
    float4 positionCS : SV_Position;
    float3 positionWS : TEXCOORD0;
    float3 normalWS : TEXCOORD1;
    float2 uv : TEXCOORD2;
#if defined(_NORMALMAP)
    float4 tangentWS : TEXCOORD3;
#endif
};

Varyings LitVertex(Attributes input)
{
    Varyings output;
    output.positionWS = TransformObjectToWorld(input.positionOS);
    output.positionCS = TransformWorldToClip(output.positionWS);
    output.normalWS = normalize(mul((float3x3)_ObjectToWorld, input.normalOS));
    output.uv = input.uv;
#if defined(_NORMALMAP)
    output.tangentWS = float4(normalize(mul((float3x3)_ObjectToWorld, input.tangentOS.xyz)), input.tangentOS.w);
#endif
    return output;
}

float3 SurfaceNormal(Varyings input)
{
#if defined(_NORMALMAP)
    float3 bitangent = cross(input.normalWS, input.tangentWS.xyz) * input.tangentWS.w;
    float3 t = _BumpMap.Sample(sampler_BaseMap, input.uv).xyz * 2.0 - 1.0;
    return normalize(t.x * input.tangentWS.xyz + t.y * bitangent + t.z * input.normalWS);
#else
    return normalize(input.normalWS);
#endif
}

float MainLightShadow(float3 positionWS)
{
#if defined(_SHADOWS_SOFT)
    float4 shadowCoord = TransformWorldToClip(positionWS);
    float2 uv = shadowCoord.xy / shadowCoord.w * 0.5 + 0.5;
    float sum = 0.0;
    [unroll] for (int i = -1; i <= 1; ++i)
    {
        sum += _ShadowMap.SampleCmpLevelZero(sampler_ShadowMap, uv + float2(i, 0) / 2048.0, shadowCoord.z);
    }
    return sum / 3.0;
#else
    return 1.0;
#endif
}

float4 LitFragment(Varyings input) : SV_Target
{
    float4 albedo = _BaseMap.Sample(sampler_BaseMap, input.uv) * _BaseColor;
#if defined(_ALPHATEST_ON)
    clip(albedo.a - _Cutoff);
#endif
    float3 n = SurfaceNormal(input);
    float ndotl = saturate(dot(n, -_MainLightDirection));
    float3 color = albedo.rgb * (0.1 + ndotl * MainLightShadow(input.positionWS));
#if defined(_EMISSION)
    color += _EmissionMap.Sample(sampler_BaseMap, input.uv).rgb * _EmissionColor.rgb;
#endif
#if defined(USING_FOG)
    color = ApplyFog(color, FogFactor(distance(input.positionWS, _CameraPosition)));
#endif
    return float4(color, albedo.a);
}

float4 ShadowFragment(Varyings input) : SV_Target
{
#if defined(_ALPHATEST_ON)
    clip(_BaseMap.Sample(sampler_BaseMap, input.uv).a * _BaseColor.a - _Cutoff);
#endif
    return 0;
}
