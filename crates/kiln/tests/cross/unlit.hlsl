// kiln test shader: HLSL with a cbuffer, a separate Texture2D and SamplerState, semantics,
// and two entry points in one file.

cbuffer Globals : register(b0)
{
    float4x4 world_view_projection;
    float4 tint;
};

Texture2D diffuse : register(t1);
SamplerState linear_clamp : register(s2);

struct VertexIn
{
    float3 position : POSITION;
    float2 uv : TEXCOORD0;
};

struct VertexOut
{
    float4 position : SV_Position;
    float2 uv : TEXCOORD0;
};

VertexOut VSMain(VertexIn input)
{
    VertexOut output;
    output.position = mul(world_view_projection, float4(input.position, 1.0));
    output.uv = input.uv;
    return output;
}

float4 PSMain(VertexOut input) : SV_Target0
{
    return diffuse.Sample(linear_clamp, input.uv) * tint;
}
